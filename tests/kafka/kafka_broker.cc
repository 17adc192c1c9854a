#include "tests/kafka/kafka_broker.h"

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "tests/tools/kafka_admin.h"

namespace ferry::testing {
namespace {

// The line Kafka logs once the broker is started and unfenced.
constexpr char kStartedMarker[] = "Kafka Server started";
// kafka_broker.sh: a symlink to the script kafka_broker (see BUILD.bazel).
constexpr char kScriptPath[] = "tests/kafka/kafka_broker.sh";

std::string ReadWholeFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream contents;
  contents << in.rdbuf();
  return contents.str();
}

std::string LastLines(const std::string& path, int lines) {
  std::ifstream in(path);
  if (!in) return "";
  std::deque<std::string> kept;
  std::string line;
  while (std::getline(in, line)) {
    kept.push_back(line);
    if (static_cast<int>(kept.size()) > lines) kept.pop_front();
  }
  std::string out;
  for (const std::string& l : kept) absl::StrAppend(&out, l, "\n");
  return out;
}

bool IsExecutable(const std::string& path) { return access(path.c_str(), X_OK) == 0; }

absl::StatusOr<std::string> FindScript(const std::string& configured) {
  if (!configured.empty()) {
    if (IsExecutable(configured)) return configured;
    return absl::NotFoundError(absl::StrCat("kafka_broker script ", configured,
                                            " missing or not executable"));
  }
  if (IsExecutable(kScriptPath)) return std::string(kScriptPath);
  const char* srcdir = std::getenv("TEST_SRCDIR");
  const char* workspace = std::getenv("TEST_WORKSPACE");
  if (srcdir != nullptr && workspace != nullptr) {
    std::string path = absl::StrCat(srcdir, "/", workspace, "/", kScriptPath);
    if (IsExecutable(path)) return path;
  }
  return absl::NotFoundError(
      absl::StrCat("no ", kScriptPath, " under the working directory or $TEST_SRCDIR (add "
                   "//tests/kafka:kafka_broker to the test's deps)"));
}

// A new empty directory; `remove` says whether the destructor deletes it.
absl::StatusOr<std::string> MakeDir(const std::string& configured, bool* remove) {
  *remove = false;
  if (!configured.empty()) {
    std::error_code error;
    std::filesystem::create_directories(configured, error);
    if (error) {
      return absl::InternalError(absl::StrCat("mkdir ", configured, ": ", error.message()));
    }
    return configured;
  }
  static std::atomic<int> counter{0};
  const char* test_tmpdir = std::getenv("TEST_TMPDIR");
  const std::string parent = test_tmpdir != nullptr ? test_tmpdir : "/tmp";
  std::string pattern = absl::StrCat(parent, "/kafka-broker-", counter++, "-XXXXXX");
  if (mkdtemp(pattern.data()) == nullptr) {
    return absl::InternalError(absl::StrCat("mkdtemp ", pattern, ": ", std::strerror(errno)));
  }
  *remove = test_tmpdir == nullptr;
  return pattern;
}

int ExitCodeOf(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

// fork + exec `script run dir` in a new process group, output to `log_path`.
// The child gets SIGKILL when the calling thread dies.
// `env` is added to this process's environment.
absl::StatusOr<pid_t> Spawn(const std::string& script, const std::string& dir,
                            const std::string& log_path, std::vector<std::string> env) {
  // Everything the child needs is prepared before fork (only async-signal-safe
  // calls after it).
  std::vector<std::string> args = {script, "run", dir};
  std::vector<char*> argv;
  for (std::string& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);
  std::vector<char*> envp;
  for (char** var = environ; *var != nullptr; ++var) envp.push_back(*var);
  for (std::string& var : env) envp.push_back(var.data());
  envp.push_back(nullptr);
  const int log_fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (log_fd < 0) {
    return absl::InternalError(absl::StrCat("open ", log_path, ": ", std::strerror(errno)));
  }
  const int null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (null_fd < 0) {
    close(log_fd);
    return absl::InternalError(absl::StrCat("open /dev/null: ", std::strerror(errno)));
  }
  const pid_t parent = getpid();

  const pid_t pid = fork();
  if (pid < 0) {
    const int error = errno;
    close(log_fd);
    close(null_fd);
    return absl::InternalError(absl::StrCat("fork: ", std::strerror(error)));
  }
  if (pid == 0) {
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);  // the parent died before prctl
    dup2(null_fd, STDIN_FILENO);
    dup2(log_fd, STDOUT_FILENO);
    dup2(log_fd, STDERR_FILENO);
    signal(SIGTERM, SIG_DFL);
    signal(SIGINT, SIG_DFL);
    signal(SIGPIPE, SIG_DFL);
    sigset_t empty;
    sigemptyset(&empty);
    sigprocmask(SIG_SETMASK, &empty, nullptr);
    execve(argv[0], argv.data(), envp.data());
    _exit(127);
  }
  setpgid(pid, pid);  // also in the parent: no window where a kill misses it
  close(log_fd);
  close(null_fd);
  return pid;
}

std::vector<std::string> ListenerEnv(const KafkaBroker::Options& options) {
  if (options.extra_listeners.empty()) return {};
  std::string value;
  for (const KafkaBroker::Options::Listener& listener : options.extra_listeners) {
    absl::StrAppend(&value, value.empty() ? "" : ",", listener.name, ":", listener.port, ":",
                    listener.advertised_port);
  }
  return {absl::StrCat("FERRY_KAFKA_EXTRA_LISTENERS=", value)};
}

}  // namespace

absl::StatusOr<std::unique_ptr<KafkaBroker>> KafkaBroker::Start() { return Start(Options()); }

absl::StatusOr<std::unique_ptr<KafkaBroker>> KafkaBroker::Start(const Options& options) {
  absl::StatusOr<std::string> script = FindScript(options.script);
  if (!script.ok()) return script.status();
  // The script picks free ports; another process may bind one before the JVM
  // does. Such a start is retried with new ports.
  constexpr int kAttempts = 3;
  absl::Status failure;
  for (int attempt = 1; attempt <= kAttempts; ++attempt) {
    bool remove_dir = false;
    absl::StatusOr<std::string> dir = MakeDir(options.dir, &remove_dir);
    if (!dir.ok()) return dir.status();
    std::error_code error;
    const std::string absolute_dir = std::filesystem::absolute(*dir, error).string();

    absl::StatusOr<pid_t> pid =
        Spawn(*script, absolute_dir, absolute_dir + "/run.log", ListenerEnv(options));
    if (!pid.ok()) return pid.status();
    std::unique_ptr<KafkaBroker> broker(new KafkaBroker(*pid, absolute_dir, remove_dir, options));
    const absl::Status ready = broker->WaitUntilReady();
    if (ready.ok()) return broker;

    const std::string tail = broker->LogTail();
    broker->Stop().IgnoreError();
    failure = absl::Status(ready.code(), absl::StrCat("Kafka broker did not start (", absolute_dir,
                                                      "): ", ready.message(), "\n", tail));
    const bool port_taken =
        absl::StrContains(ReadWholeFile(absolute_dir + "/broker.log"), "Address already in use") ||
        absl::StrContains(ReadWholeFile(absolute_dir + "/run.log"), "Address already in use");
    if (!port_taken) break;
  }
  return failure;
}

absl::Status KafkaBroker::WaitUntilReady() {
  const absl::Time deadline = absl::Now() + options_.start_timeout;
  const std::string broker_log = dir_ + "/broker.log";
  std::string address;
  absl::Status last = absl::UnavailableError("no broker.log yet");
  while (absl::Now() < deadline) {
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return absl::InternalError(
          absl::StrCat("kafka_broker run exited with code ", ExitCodeOf(status)));
    }
    if (address.empty()) {
      address = std::string(absl::StripAsciiWhitespace(ReadWholeFile(dir_ + "/address")));
    }
    if (!address.empty() && ReadWholeFile(broker_log).find(kStartedMarker) != std::string::npos) {
      absl::StatusOr<int> brokers = test_tools::ReadBrokerCount(address, absl::Seconds(5));
      if (brokers.ok() && *brokers >= 1) {
        bootstrap_ = address;
        const std::string tmp = dir_ + "/bootstrap.tmp";
        std::ofstream(tmp) << address << "\n";
        std::rename(tmp.c_str(), (dir_ + "/bootstrap").c_str());
        return absl::OkStatus();
      }
      last = brokers.ok() ? absl::UnavailableError("metadata lists no broker") : brokers.status();
    }
    absl::SleepFor(absl::Milliseconds(100));  // polling the starting JVM
  }
  return absl::DeadlineExceededError(
      absl::StrCat("not ready after ", absl::FormatDuration(options_.start_timeout),
                   " (last: ", last.ToString(), ")"));
}

KafkaBroker::~KafkaBroker() {
  Stop().IgnoreError();
  if (remove_dir_ && std::getenv("FERRY_KAFKA_KEEP_DIR") == nullptr) {
    std::error_code error;
    std::filesystem::remove_all(dir_, error);
  }
}

absl::Status KafkaBroker::CreateTopic(const std::string& name, int32_t partitions,
                                      absl::Duration timeout) const {
  if (bootstrap_.empty()) return absl::FailedPreconditionError("the broker is not running");
  return test_tools::CreateTopic(bootstrap_, name, partitions, /*replication_factor=*/1,
                                 /*config=*/{}, timeout);
}

std::string KafkaBroker::LogTail(int lines) const {
  std::string out;
  for (const char* name : {"run.log", "broker.log"}) {
    const std::string path = absl::StrCat(dir_, "/", name);
    const std::string tail = LastLines(path, lines);
    if (tail.empty()) continue;
    absl::StrAppend(&out, "---- last lines of ", path, " ----\n", tail);
  }
  if (out.empty()) out = absl::StrCat("(no logs in ", dir_, ")\n");
  return out;
}

absl::Status KafkaBroker::Stop() {
  absl::Status result = absl::OkStatus();
  if (pid_ > 0) {
    kill(-pid_, SIGTERM);
    const absl::Time deadline = absl::Now() + options_.stop_grace;
    std::optional<int> exit_code;
    while (!exit_code.has_value()) {
      int status = 0;
      const pid_t done = waitpid(pid_, &status, WNOHANG);
      if (done == pid_ || (done < 0 && errno == ECHILD)) {
        exit_code = done == pid_ ? ExitCodeOf(status) : -1;
        break;
      }
      if (absl::Now() >= deadline) {
        kill(-pid_, SIGKILL);
        waitpid(pid_, &status, 0);
        result = absl::DeadlineExceededError(
            absl::StrCat("broker ", pid_, " ignored SIGTERM for ",
                         absl::FormatDuration(options_.stop_grace), "; killed"));
        break;
      }
      absl::SleepFor(absl::Milliseconds(20));  // polling the JVM's exit
    }
    pid_ = -1;
    bootstrap_.clear();
    std::remove((dir_ + "/bootstrap").c_str());
    CopyLogToOutputs();
  }
  return result;
}

void KafkaBroker::CopyLogToOutputs() const {
  const char* outputs = std::getenv("TEST_UNDECLARED_OUTPUTS_DIR");
  if (outputs != nullptr && !dir_.empty()) {
    std::error_code error;
    const std::filesystem::path log = dir_ + "/broker.log";
    if (std::filesystem::exists(log, error)) {
      std::filesystem::copy_file(
          log,
          std::filesystem::path(outputs) /
              absl::StrCat(std::filesystem::path(dir_).filename().string(), "-broker.log"),
          std::filesystem::copy_options::overwrite_existing, error);
    }
  }
}

}  // namespace ferry::testing
