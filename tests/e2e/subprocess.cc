#include "tests/e2e/subprocess.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "tests/e2e/sanitizer_reports.h"

extern char** environ;

namespace ferry::testing {
namespace {

int ExitCodeOf(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

// Fails the test binary when a child printed a sanitizer report
// (sanitizer_reports.h says why this is not left to each test).
class ChildSanitizerReportCheck : public ::testing::Environment {
 public:
  void TearDown() override {
    EXPECT_EQ(CollectChildSanitizerReports(), "")
        << "a child process printed a sanitizer report (above: its log and first lines)";
  }
};

// Registered before main(), so every test binary that starts children has it.
[[maybe_unused]] ::testing::Environment* const kChildSanitizerReportCheck =
    ::testing::AddGlobalTestEnvironment(new ChildSanitizerReportCheck);

}  // namespace

absl::StatusOr<Subprocess> Subprocess::Start(const std::vector<std::string>& argv,
                                             const std::string& log_path) {
  WatchChildLog(log_path);  // before O_TRUNC below drops a previous child's report
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log_path.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  // Children start with no blocked signals, whatever the test runner blocks.
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  sigset_t empty;
  sigemptyset(&empty);
  posix_spawnattr_setsigmask(&attributes, &empty);
  posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETSIGMASK);
  std::vector<char*> args;
  for (const std::string& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
  args.push_back(nullptr);
  pid_t pid = -1;
  const int error = posix_spawn(&pid, args[0], &actions, &attributes, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attributes);
  if (error != 0) {
    return absl::InternalError(absl::StrCat("spawn ", argv[0], ": ", std::strerror(error)));
  }
  return Subprocess(pid, log_path);
}

Subprocess::Subprocess(Subprocess&& other) noexcept
    : pid_(other.pid_), log_path_(std::move(other.log_path_)), exit_code_(other.exit_code_) {
  other.pid_ = -1;
}

Subprocess& Subprocess::operator=(Subprocess&& other) noexcept {
  if (this != &other) {
    KillAndReap();
    pid_ = other.pid_;
    log_path_ = std::move(other.log_path_);
    exit_code_ = other.exit_code_;
    other.pid_ = -1;
  }
  return *this;
}

Subprocess::~Subprocess() { KillAndReap(); }

void Subprocess::KillAndReap() {
  if (pid_ > 0 && !exit_code_.has_value()) {
    kill(pid_, SIGKILL);
    int status = 0;
    waitpid(pid_, &status, 0);
  }
  pid_ = -1;
  exit_code_.reset();
}

void Subprocess::Signal(int signal_number) const {
  if (pid_ > 0 && !exit_code_.has_value()) kill(pid_, signal_number);
}

std::optional<int> Subprocess::TryWait() {
  if (exit_code_.has_value() || pid_ <= 0) return exit_code_;
  int status = 0;
  if (waitpid(pid_, &status, WNOHANG) == pid_) exit_code_ = ExitCodeOf(status);
  return exit_code_;
}

absl::StatusOr<int> Subprocess::Wait(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (!TryWait().has_value()) {
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(absl::StrCat("pid ", pid_, " still running"));
    }
    absl::SleepFor(absl::Milliseconds(10));  // polling a child's exit
  }
  return *exit_code_;
}

std::string Subprocess::Log() const {
  std::ifstream in(log_path_);
  std::stringstream contents;
  contents << in.rdbuf();
  return contents.str();
}

absl::StatusOr<std::string> WaitForFile(const std::string& path, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    std::ifstream in(path);
    if (in) {
      std::stringstream contents;
      contents << in.rdbuf();
      if (!contents.str().empty()) return contents.str();
    }
    absl::SleepFor(absl::Milliseconds(20));  // polling for a readiness file
  }
  return absl::DeadlineExceededError(absl::StrCat("no file ", path, " after ",
                                                  absl::FormatDuration(timeout)));
}

}  // namespace ferry::testing
