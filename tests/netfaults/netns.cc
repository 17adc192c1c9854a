#include "tests/netfaults/netns.h"

#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace ferry::testing {
namespace {

constexpr char kTable[] = "ferry_netfaults";

std::string NftBinary() {
  const char* configured = std::getenv("FERRY_NFT");
  if (configured != nullptr && *configured != '\0') return configured;
  for (const char* path : {"/usr/sbin/nft", "/sbin/nft", "/usr/bin/nft"}) {
    if (access(path, X_OK) == 0) return path;
  }
  return "nft";
}

// Runs argv to completion; its output is captured for the error message.
absl::Status Run(const std::vector<std::string>& args) {
  int pipe_fds[2];
  if (pipe(pipe_fds) != 0) return absl::InternalError(absl::StrCat("pipe: ", std::strerror(errno)));
  std::vector<char*> argv;
  std::vector<std::string> copy = args;
  for (std::string& arg : copy) argv.push_back(arg.data());
  argv.push_back(nullptr);
  const pid_t pid = fork();
  if (pid < 0) return absl::InternalError(absl::StrCat("fork: ", std::strerror(errno)));
  if (pid == 0) {
    dup2(pipe_fds[1], STDOUT_FILENO);
    dup2(pipe_fds[1], STDERR_FILENO);
    close(pipe_fds[0]);
    close(pipe_fds[1]);
    execvp(argv[0], argv.data());
    _exit(127);
  }
  close(pipe_fds[1]);
  std::string output;
  char buffer[512];
  ssize_t n;
  while ((n = read(pipe_fds[0], buffer, sizeof(buffer))) > 0) output.append(buffer, n);
  close(pipe_fds[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return absl::OkStatus();
  return absl::InternalError(absl::StrCat("`", absl::StrJoin(args, " "), "` failed (status ",
                                          status, "): ", output));
}

absl::Status Nft(const std::string& command) {
  return Run({NftBinary(), command});
}

}  // namespace

absl::Status EnterPrivateNetwork() {
  if (unshare(CLONE_NEWNET) != 0) {
    return absl::PermissionDeniedError(absl::StrCat(
        "unshare(CLONE_NEWNET): ", std::strerror(errno), " (the network-fault tests run as root)"));
  }
  return Run({"ip", "link", "set", "lo", "up"});
}

absl::StatusOr<PacketFilter> PacketFilter::Create() {
  absl::Status status = Nft(absl::StrCat("add table inet ", kTable));
  if (status.ok()) {
    status = Nft(absl::StrCat("add chain inet ", kTable,
                              " output { type filter hook output priority 0; policy accept; }"));
  }
  if (!status.ok()) return status;
  return PacketFilter();
}

absl::Status PacketFilter::EnsurePortChain(int port) {
  if (chains_.count(port) > 0) return absl::OkStatus();
  // Loopback packets pass the output hook once each way: to the port and
  // from it.
  const std::string chain = absl::StrCat("port_", port);
  absl::Status status = Nft(absl::StrCat("add chain inet ", kTable, " ", chain));
  for (const char* direction : {"dport", "sport"}) {
    if (!status.ok()) break;
    status = Nft(absl::StrCat("add rule inet ", kTable, " output tcp ", direction, " ", port,
                              " jump ", chain));
  }
  if (status.ok()) chains_.insert(port);
  return status;
}

absl::Status PacketFilter::Drop(int port) {
  absl::Status status = EnsurePortChain(port);
  if (!status.ok()) return status;
  return Nft(absl::StrCat("add rule inet ", kTable, " port_", port, " drop"));
}

absl::Status PacketFilter::Lose(int port, int percent) {
  if (percent < 0 || percent > 100) {
    return absl::InvalidArgumentError(absl::StrCat("loss of ", percent, "%"));
  }
  absl::Status status = EnsurePortChain(port);
  if (!status.ok()) return status;
  return Nft(absl::StrCat("add rule inet ", kTable, " port_", port,
                          " numgen random mod 100 < ", percent, " drop"));
}

absl::Status PacketFilter::Heal(int port) {
  if (chains_.count(port) == 0) return absl::OkStatus();
  return Nft(absl::StrCat("flush chain inet ", kTable, " port_", port));
}

}  // namespace ferry::testing
