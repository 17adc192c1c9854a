// Subprocess: a child process for end-to-end tests (ferry, workers, the mock
// cluster). Output goes to a log file the test prints on failure. The
// destructor kills and reaps a child that is still running, so a failing test
// leaves nothing behind.
//
// Threading: one owner thread.
#ifndef FERRY_TESTS_E2E_SUBPROCESS_H_
#define FERRY_TESTS_E2E_SUBPROCESS_H_

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace ferry::testing {

class Subprocess {
 public:
  // Starts `argv[0]` with arguments; stdout and stderr go to `log_path`.
  static absl::StatusOr<Subprocess> Start(const std::vector<std::string>& argv,
                                          const std::string& log_path);
  // No process (pid -1) until assigned from Start().
  Subprocess() = default;
  Subprocess(Subprocess&& other) noexcept;
  Subprocess& operator=(Subprocess&& other) noexcept;
  Subprocess(const Subprocess&) = delete;
  Subprocess& operator=(const Subprocess&) = delete;
  ~Subprocess();

  pid_t pid() const { return pid_; }
  const std::string& log_path() const { return log_path_; }

  // Sends a signal (SIGTERM by default).
  void Signal(int signal_number) const;
  // Waits up to `timeout` for exit; returns the exit code (128+signal when
  // killed by one), or DeadlineExceeded.
  absl::StatusOr<int> Wait(absl::Duration timeout);
  // nullopt while running.
  std::optional<int> TryWait();
  // The log file's contents.
  std::string Log() const;

 private:
  Subprocess(pid_t pid, std::string log_path) : pid_(pid), log_path_(std::move(log_path)) {}
  // Kills a still-running child and reaps it; leaves no process.
  void KillAndReap();
  pid_t pid_ = -1;
  std::string log_path_;
  std::optional<int> exit_code_;
};

// Polls `path` until it exists and is non-empty (a child's readiness signal),
// or returns DeadlineExceeded.
absl::StatusOr<std::string> WaitForFile(const std::string& path, absl::Duration timeout);

}  // namespace ferry::testing

#endif  // FERRY_TESTS_E2E_SUBPROCESS_H_
