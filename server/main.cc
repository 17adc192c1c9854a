// ferry: consumes Kafka topics and pushes each record, as an Event, to gRPC
// Processor workers; commits an offset only when it and everything before it
// is finished.
//
//   ferry --config ferry.yaml
//   ferry                      (embedded default: in-process mock Kafka)
//
// Startup order: config → [embedded cluster] → engine → gRPC server →
// metrics endpoint → worker streams → consumer → committer → progress.
// Shutdown (SIGTERM, SIGINT or SIGHUP; server/shutdown_signals.h) runs in
// reverse: stop fetching and dispatching, wait for what workers have up to
// the grace period (server/drain.h), commit, leave the group, close worker
// streams, stop serving metrics, exit 0.
#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/grpcpp.h>
#include <prometheus/registry.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <thread>
#include <fstream>
#include <memory>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "core/common/clock.h"
#include "core/engine/committer.h"
#include "core/config/config.h"
#include "core/kafka/consumer_stats.h"
#include "core/kafka/decoder.h"
#include "core/engine/engine.h"
#include "core/engine/engine_stats.h"
#include "core/control/control_log.h"
#include "core/kafka/consumer.h"
#include "core/kafka/dead_letter_writer.h"
#include "core/common/log.h"
#include "server/control_service.h"
#include "server/drain.h"
#include "server/embedded_cluster.h"
#include "server/health.h"
#include "server/observability/metrics.h"
#include "server/observability/progress_reporter.h"
#include "server/replica_identity.h"
#include "server/shutdown_signals.h"
#include "server/workers/tls_credentials.h"
#include "server/version.h"
#include "server/workers/worker_pool.h"
#include "server/workers/worker_pool_stats.h"

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

constexpr int kExitConfigError = 2;
constexpr int kExitStartupError = 3;

// The bearer token Control calls must present (control.token_file), with
// surrounding whitespace (a trailing newline) removed.
absl::StatusOr<std::string> ReadControlToken(const std::string& path) {
  if (path.empty()) return std::string();
  std::ifstream in(path);
  if (!in) {
    return absl::InvalidArgumentError(
        absl::StrCat("control.token_file: cannot read ", path, ": ", std::strerror(errno)));
  }
  std::string token((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  token = std::string(absl::StripAsciiWhitespace(token));
  if (token.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("control.token_file: ", path, " is empty; put the token in it"));
  }
  return token;
}

int Run(int argc, char** argv) {
  // Block the shutdown signals before any thread starts, so every thread
  // inherits the mask and only ShutdownSignals receives them.
  ShutdownSignals signals;

  // Debian's abseil is built without NDEBUG, so every Mutex lock would pay
  // for deadlock-cycle detection (about 60 ns, dozens of times per event;
  // see bench/RESULTS.md). ferry's lock order is simple and reviewed.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  absl::SetProgramUsageMessage("ferry --config FILE   (see README.md)");
  // --help lists the flags of this file (absl looks for files named like the
  // program by default, and main.cc is not).
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
  const std::string config_path = absl::GetFlag(FLAGS_config);
  absl::StatusOr<Config> parsed = config_path.empty()
                                      ? ParseConfig(EmbeddedDefaultConfigYaml(), "<embedded default>")
                                      : LoadConfigFile(config_path);
  if (!parsed.ok()) {
    std::fprintf(stderr, "ferry: invalid config: %s\n",
                 std::string(parsed.status().message()).c_str());
    return kExitConfigError;
  }
  Config config = *std::move(parsed);
  if (config.log_format == "json") SetLogFormat(LogFormat::kJson);
  if (config.log_format == "text") SetLogFormat(LogFormat::kText);
  if (!absl::GetFlag(FLAGS_embedded_bootstrap_file).empty()) {
    config.embedded_bootstrap_file = absl::GetFlag(FLAGS_embedded_bootstrap_file);
  }
  absl::StatusOr<std::unique_ptr<Decoder>> decoder = Decoder::Create(config.topics);
  if (!decoder.ok()) {
    std::fprintf(stderr, "ferry: invalid config: %s\n",
                 std::string(decoder.status().message()).c_str());
    return kExitConfigError;
  }
  absl::StatusOr<std::string> control_token = ReadControlToken(config.control_token_file);
  if (!control_token.ok()) {
    std::fprintf(stderr, "ferry: invalid config: %s\n",
                 std::string(LocateConfigError(config, control_token.status()).message()).c_str());
    return kExitConfigError;
  }
  absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> server_credentials =
      ServerCredentialsFor(config.server_tls, "server.tls");
  if (!server_credentials.ok()) {
    std::fprintf(stderr, "ferry: invalid config: %s\n",
                 std::string(LocateConfigError(config, server_credentials.status()).message())
                     .c_str());
    return kExitConfigError;
  }
  if (absl::GetFlag(FLAGS_check_config)) {
    std::printf("config OK: %zu topics, %zu processors\n", config.topics.size(),
                config.processors.size());
    return 0;
  }

  // Declared before every Kafka client, so it is destroyed after them.
  std::unique_ptr<EmbeddedCluster> cluster;
  if (config.UsesEmbeddedCluster()) {
    absl::StatusOr<std::unique_ptr<EmbeddedCluster>> started = EmbeddedCluster::StartFor(config);
    if (!started.ok()) {
      LogError("ferry", started.status().ToString());
      return kExitStartupError;
    }
    cluster = *std::move(started);
  }

  // One name for this replica everywhere (server/replica_identity.h).
  const std::string replica = ReplicaIdentity(config.kafka);
  config.kafka["client.id"] = replica;
  absl::StatusOr<std::unique_ptr<ControlLog>> control = ControlLog::Create(config, replica);
  if (!control.ok()) {
    std::fprintf(stderr, "ferry: invalid config: %s\n",
                 std::string(control.status().message()).c_str());
    return kExitConfigError;
  }

  // Dead letters: one no-loss producer when any failure policy uses them.
  bool needs_dead_letters = config.PolicyFor(-1) == FailurePolicy::kDeadLetter;
  for (size_t i = 0; i < config.processors.size(); ++i) {
    needs_dead_letters =
        needs_dead_letters || config.PolicyFor(static_cast<int>(i)) == FailurePolicy::kDeadLetter;
  }
  std::unique_ptr<KafkaDeadLetterWriter> dead_letters;
  if (needs_dead_letters) {
    absl::StatusOr<std::unique_ptr<KafkaDeadLetterWriter>> writer =
        KafkaDeadLetterWriter::Create(config.kafka, replica);
    if (!writer.ok()) {
      std::fprintf(stderr, "ferry: invalid config: %s\n",
                   std::string(writer.status().message()).c_str());
      return kExitConfigError;
    }
    dead_letters = *std::move(writer);
  }

  // Metrics: counters and histograms live in one registry, updated as
  // things happen; state gauges are computed when /metrics is scraped.
  auto registry = std::make_shared<prometheus::Registry>();
  EngineStats engine_stats(*registry, config);
  ConsumerStats consumer_stats(*registry);
  WorkerPoolStats worker_stats(*registry, config);

  Engine engine(config, RealClock::Get(), dead_letters.get(), &engine_stats);
  absl::StatusOr<std::unique_ptr<KafkaConsumer>> consumer =
      KafkaConsumer::Create(config, &engine, decoder->get(), &consumer_stats);
  if (!consumer.ok()) {
    std::fprintf(stderr, "ferry: invalid config: %s\n",
                 std::string(consumer.status().message()).c_str());
    return kExitConfigError;
  }

  // Worker channels (credentials checked now: a bad `tls:` is a config
  // error before anything starts).
  absl::StatusOr<std::unique_ptr<WorkerPool>> workers =
      WorkerPool::Create(config, &engine, &worker_stats);
  if (!workers.ok()) {
    std::fprintf(stderr, "ferry: invalid config: %s\n",
                 std::string(workers.status().message()).c_str());
    return kExitConfigError;
  }

  // Operator commands: read the group's control topic before anything is
  // fetched, so a pause issued earlier holds from the first record.
  absl::Status control_started = (*control)->Start();
  if (!control_started.ok()) {
    LogError("ferry", "cannot use the control topic: ", control_started.ToString());
    return kExitStartupError;
  }
  (*consumer)->SetControlLog(control->get());

  // ferry's own gRPC server: Control, health and reflection (so grpcurl
  // can list and call everything).
  ControlService control_service(config, &engine, consumer->get(), control->get(),
                                 *control_token, registry.get());
  EnableHealthService();
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  int bound_port = 0;
  builder.AddListeningPort(config.listen_address, *server_credentials, &bound_port);
  builder.RegisterService(&control_service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || bound_port == 0) {
    LogError("ferry", "cannot listen on ", config.listen_address,
             " (server.listen): address in use or invalid");
    return kExitStartupError;
  }
  SetServing(*server, true);
  LogInfo("ferry", "serving Control, health and reflection on port ", bound_port,
          config.server_tls.enabled
              ? (config.server_tls.ca_file.empty() ? " over TLS" : " over mTLS")
              : " (plaintext)",
          control_token->empty() ? "; no Control token (control.token_file unset)"
                                 : "; Control requires a bearer token");

  // Probes that cannot speak TLS (the kubelet's gRPC probe) get a plaintext
  // port with nothing but the health service.
  std::unique_ptr<grpc::Server> health_server;
  if (!config.health_listen_address.empty()) {
    absl::StatusOr<std::unique_ptr<grpc::Server>> started =
        StartPlaintextHealthServer(config.health_listen_address);
    if (!started.ok()) {
      LogError("ferry", started.status().message());
      server->Shutdown();
      return kExitStartupError;
    }
    health_server = *std::move(started);
  }

  KafkaConsumer* consumer_ptr = consumer->get();
  std::unique_ptr<MetricsServer> metrics;
  auto state_collector = std::make_shared<StateCollector>(
      config, [&engine] { return engine.Snapshot(); },
      [consumer_ptr] { return consumer_ptr->FetchStates(); }, RealClock::Get());
  auto process_collector = std::make_shared<ProcessCollector>();
  if (!config.metrics_listen_address.empty()) {
    absl::StatusOr<std::unique_ptr<MetricsServer>> started_metrics =
        MetricsServer::Start(config.metrics_listen_address);
    if (!started_metrics.ok()) {
      LogError("ferry", started_metrics.status().message(),
               " (server.metrics_listen): address in use or invalid; `metrics_listen: off` "
               "disables metrics");
      server->Shutdown();
      return kExitStartupError;
    }
    metrics = *std::move(started_metrics);
    metrics->Register(registry);
    metrics->Register(state_collector);
    metrics->Register(process_collector);
    LogInfo("ferry", "serving metrics on port ", metrics->port(), " (GET /metrics)");
  } else {
    LogInfo("ferry", "metrics disabled (server.metrics_listen: off)");
  }

  if (dead_letters != nullptr) dead_letters->Start();
  (*workers)->Start();
  absl::Status started = (*consumer)->Start();
  if (!started.ok()) {
    LogError("ferry", "cannot start consumer: ", started.ToString());
    (*workers)->Stop();
    server->Shutdown();
    (*control)->Stop();
    return kExitStartupError;
  }
  Committer committer(&engine, consumer->get(), config.commit_interval);
  committer.Start();
  ProgressReporter progress(
      &engine, [consumer_ptr] { return consumer_ptr->HighWatermarks(); },
      config.progress_interval);
  progress.Start();
  LogInfo("ferry", "running: group ", config.kafka["group.id"], ", ", config.topics.size(),
          " topics, ", config.processors.size(), " processors, replica ", replica);

  const int signal_number = signals.WaitForFirst();
  LogInfo("ferry", ShutdownSignals::Name(signal_number), ": shutting down (grace ",
          absl::FormatDuration(config.shutdown_grace),
          "; signal again to stop waiting for in-flight events)");
  signals.WatchForMore();

  // Reverse order of startup. Readiness goes first, so Kubernetes stops
  // routing to this pod while it drains.
  SetServing(*server, false);
  if (health_server != nullptr) SetServing(*health_server, false);
  Drain(engine, *consumer_ptr, config.shutdown_grace, [&signals] { return signals.stop_waiting(); });
  if (engine.Buffered() > 0) {
    LogInfo("ferry", engine.Buffered(), " consumed events stay uncommitted for the next owner");
  }
  progress.Stop();
  // Metrics stay up through the drain. Stopping the HTTP server can take up
  // to 2s after a scrape (civetweb's poll quantum), so it stops while the
  // rest shuts down.
  std::thread metrics_stopper([&metrics] { metrics.reset(); });
  committer.Stop();        // final commit
  consumer_ptr->Stop();    // commit on revoke, leave the group
  if (dead_letters != nullptr) dead_letters->Stop();
  (*workers)->Stop();
  server->Shutdown(absl::ToChronoTime(absl::Now() + absl::Seconds(2)));
  if (health_server != nullptr) health_server->Shutdown(absl::ToChronoTime(absl::Now()));
  (*control)->Stop();      // after the last Control call and the consumer
  metrics_stopper.join();  // no scrape reads the consumer after this
  consumer->reset();
  control->reset();
  // The embedded cluster goes last, when the scope ends (it is declared
  // before every Kafka client): a client still connected when it goes logs
  // librdkafka's "1/1 brokers are down" ERROR on an orderly stop.
  LogInfo("ferry", "stopped");
  return 0;
}

}  // namespace
}  // namespace ferry

int main(int argc, char** argv) { return ferry::Run(argc, argv); }
