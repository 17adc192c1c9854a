#include "tests/tools/ferryctl_runner.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "gtest/gtest.h"

extern char** environ;

namespace ferry::testing {
namespace {

std::string ReadWhole(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream contents;
  contents << in.rdbuf();
  return contents.str();
}

}  // namespace

FerryctlOutcome RunFerryctl(const std::string& binary, const std::vector<std::string>& args,
                            const std::vector<std::string>& env, const std::string& output_base) {
  std::vector<std::string> all_args = args;
  all_args.insert(all_args.begin(), binary);
  std::vector<char*> argv;
  for (std::string& arg : all_args) argv.push_back(arg.data());
  argv.push_back(nullptr);
  std::vector<std::string> environment;
  for (char** e = environ; *e != nullptr; ++e) {
    if (!absl::StartsWith(*e, "FERRY_CONTROL_TOKEN=")) environment.push_back(*e);
  }
  environment.insert(environment.end(), env.begin(), env.end());
  std::vector<char*> envp;
  for (std::string& e : environment) envp.push_back(e.data());
  envp.push_back(nullptr);

  const std::string out_path = output_base + ".out";
  const std::string err_path = output_base + ".err";
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, out_path.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, err_path.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  pid_t pid = -1;
  const int spawned =
      posix_spawn(&pid, binary.c_str(), &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  FerryctlOutcome run;
  if (spawned != 0) {
    ADD_FAILURE() << "cannot start " << binary << ": " << std::strerror(spawned);
    return run;
  }
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) {  // ferryctl's own --timeout bounds the wait
    ADD_FAILURE() << "waitpid: " << std::strerror(errno);
    return run;
  }
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  run.out = ReadWhole(out_path);
  run.err = ReadWhole(err_path);
  return run;
}

}  // namespace ferry::testing
