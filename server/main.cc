// ferry (`ferry --config ferry.yaml`; without --config: an embedded mock Kafka).
// main parses the flags, loads the config, installs the shutdown signals and
// runs the Server (server/server.h; startup and shutdown orders in
// server/README.md).
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"
#include "absl/synchronization/mutex.h"
#include "core/common/log.h"
#include "core/config/config.h"
#include "server/server.h"
#include "server/shutdown_signals.h"
#include "server/version.h"

ABSL_FLAG(std::string, config, "",
          "Path of the YAML config file. Empty: the embedded default (mock Kafka in-process, "
          "one processor at 127.0.0.1:50051).");
ABSL_FLAG(bool, print_default_config, false, "Print the embedded default config and exit.");
ABSL_FLAG(bool, check_config, false, "Validate the config file and exit (0 if valid).");
ABSL_FLAG(std::string, embedded_bootstrap_file, "",
          "With the embedded cluster: write its bootstrap address to this file (overrides "
          "embedded.bootstrap_file), so a producer can find it.");

namespace ferry {
namespace {

// Exit codes: 2 for an invalid config, 3 when ferry cannot start with it.
int Fail(const absl::Status& status) {
  if (IsConfigError(status)) {
    std::fprintf(stderr, "ferry: invalid config: %s\n", std::string(status.message()).c_str());
    return 2;
  }
  LogError("ferry", status.message());
  return 3;
}

absl::StatusOr<Config> LoadConfig() {
  const std::string path = absl::GetFlag(FLAGS_config);
  absl::StatusOr<Config> config =
      path.empty() ? ParseConfig(EmbeddedDefaultConfigYaml(), "<embedded default>")
                   : LoadConfigFile(path);
  if (!config.ok()) return absl::InvalidArgumentError(config.status().message());
  if (config->log_format == "json") SetLogFormat(LogFormat::kJson);
  if (config->log_format == "text") SetLogFormat(LogFormat::kText);
  if (!absl::GetFlag(FLAGS_embedded_bootstrap_file).empty()) {
    config->embedded_bootstrap_file = absl::GetFlag(FLAGS_embedded_bootstrap_file);
  }
  return config;
}

// gRPC reads these when it first initializes, so before any gRPC object.
// ferry's worker streams are polled by its own completion loop
// (server/workers/completion_loop.h). With gRPC's default "epoll1" engine all
// polling threads share one epoll set, so the Control server's callback
// threads would still pick up the worker streams' reads and hand them over:
// a futex wake-up and a context switch per message. With the "poll" engine
// each completion queue polls only its own calls' sockets (bench/RESULTS.md,
// stop 35; stop 30 tried "poll" with the streams on gRPC's callback threads
// and lost a read). A channel with no call yet (connecting) is then polled by
// gRPC's backup poller, every 50 ms here instead of every 5 s, so a worker is
// connected to at once. An operator's own setting wins.
void ConfigureGrpcPolling() {
  setenv("GRPC_POLL_STRATEGY", "poll", /*overwrite=*/0);
  setenv("GRPC_CLIENT_CHANNEL_BACKUP_POLL_INTERVAL_MS", "50", /*overwrite=*/0);
}

int Run(int argc, char** argv) {
  ConfigureGrpcPolling();
  // Before any thread starts: every thread inherits the blocked mask.
  ShutdownSignals signals;
  // Debian's abseil has no NDEBUG: deadlock-cycle detection would cost ~60ns a
  // lock, dozens of times per event (bench/RESULTS.md); the lock order is simple.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  absl::SetProgramUsageMessage("ferry --config FILE   (see README.md)");
  // --help lists this file's flags (absl looks for files named like the binary).
  absl::FlagsUsageConfig usage_config;
  usage_config.contains_help_flags = [](absl::string_view path) {
    return absl::EndsWith(path, "server/main.cc");
  };
  usage_config.version_string = [] { return VersionText(); };
  absl::SetFlagsUsageConfig(usage_config);
  absl::ParseCommandLine(argc, argv);
  if (absl::GetFlag(FLAGS_print_default_config)) {
    std::fputs(EmbeddedDefaultConfigYaml().c_str(), stdout);
    return 0;
  }
  absl::StatusOr<Config> config = LoadConfig();
  if (!config.ok()) return Fail(config.status());
  if (absl::GetFlag(FLAGS_check_config)) {
    if (absl::Status bad = Server::CheckConfig(*config); !bad.ok()) return Fail(bad);
    std::printf("config OK: %zu topics, %zu processors\n", config->topics.size(),
                config->processors.size());
    return 0;
  }
  absl::StatusOr<std::unique_ptr<Server>> server = Server::Create(*config);
  absl::Status started = server.ok() ? (*server)->Start() : server.status();
  if (!started.ok()) return Fail(started);  // ~Server stops what had started
  const int signal_number = signals.WaitForFirst();
  // At once: "nothing more is dispatched" counts from the signal, not from
  // after the log line below (a slow reader of stderr can block it).
  (*server)->StopIntake();
  LogInfo("ferry", ShutdownSignals::Name(signal_number), ": shutting down (grace ",
          absl::FormatDuration(config->shutdown_grace),
          "; signal again to stop waiting for in-flight events)");
  signals.WatchForMore();
  (*server)->Drain([&signals] { return signals.stop_waiting(); });
  (*server)->Stop();
  LogInfo("ferry", "stopped");
  return 0;
}
}  // namespace
}  // namespace ferry
int main(int argc, char** argv) { return ferry::Run(argc, argv); }
