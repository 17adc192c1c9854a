// FerryctlRunner: runs the real ferryctl binary as a child process for a
// test and collects what it printed and its exit code. Shared by ferryctl's
// own tests (clients/ferryctl/*_test.cc) so the spawning is written once.
//
// Threading: a plain function; call it from the test thread. It blocks until
// ferryctl exits (ferryctl's own --timeout bounds that).
#ifndef FERRY_TESTS_TOOLS_FERRYCTL_RUNNER_H_
#define FERRY_TESTS_TOOLS_FERRYCTL_RUNNER_H_

#include <string>
#include <vector>

namespace ferry::testing {

struct FerryctlOutcome {
  int exit_code = -1;  // 128 + signal when killed by one; -1 when it did not run
  std::string out;
  std::string err;
};

// Runs `binary` with `args`, in this process's environment without
// FERRY_CONTROL_TOKEN plus `env` ("NAME=value" entries), stdin from
// /dev/null, stdout and stderr to `output_base`.out and .err. A failure to
// start or reap it is a test failure (ADD_FAILURE) and exit_code -1.
FerryctlOutcome RunFerryctl(const std::string& binary, const std::vector<std::string>& args,
                            const std::vector<std::string>& env, const std::string& output_base);

}  // namespace ferry::testing

#endif  // FERRY_TESTS_TOOLS_FERRYCTL_RUNNER_H_
