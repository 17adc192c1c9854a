#include "server/server.h"

#include <grpcpp/grpcpp.h>
#include <prometheus/registry.h>

#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "core/common/clock.h"
#include "core/common/log.h"
#include "core/control/control_log.h"
#include "core/engine/committer.h"
#include "core/engine/engine.h"
#include "core/engine/engine_stats.h"
#include "core/engine/engine_timer.h"
#include "core/kafka/consumer.h"
#include "core/kafka/consumer_stats.h"
#include "core/kafka/dead_letter_writer.h"
#include "core/kafka/decoder.h"
#include "server/control_endpoint.h"
#include "server/control_service.h"
#include "server/control_token.h"
#include "server/drain.h"
#include "server/embedded_cluster.h"
#include "server/health.h"
#include "server/observability/metrics.h"
#include "server/observability/progress_reporter.h"
#include "server/reflection_service.h"
#include "server/replica_identity.h"
#include "server/stop_sequence.h"
#include "server/workers/tls_credentials.h"
#include "server/workers/worker_pool.h"
#include "server/workers/worker_pool_stats.h"

namespace ferry {
namespace {

// The two kinds of error Create and Start report (see server.h).
absl::Status ConfigError(absl::string_view message) {
  return absl::InvalidArgumentError(message);
}
absl::Status StartupError(absl::string_view message) { return absl::UnavailableError(message); }

// Control calls are rare and block on Kafka for up to seconds: a few at once
// (GetStatus answers while a Pause waits), a bounded backlog beyond them.
constexpr int kControlThreads = 4;
constexpr int kControlCallsQueued = 64;

// What the config names outside itself, read and checked before anything
// connects (and all that --check_config checks beyond parsing).
struct ConfigInputs {
  std::unique_ptr<Decoder> decoder;
  std::string control_token;
  std::shared_ptr<grpc::ServerCredentials> credentials;
};

absl::StatusOr<ConfigInputs> ReadConfigInputs(const Config& config) {
  ConfigInputs inputs;
  absl::StatusOr<std::unique_ptr<Decoder>> decoder = Decoder::Create(config.topics);
  if (!decoder.ok()) return ConfigError(decoder.status().message());
  inputs.decoder = *std::move(decoder);
  absl::StatusOr<std::string> token = ReadControlToken(config.control_token_file);
  if (!token.ok()) return ConfigError(LocateConfigError(config, token.status()).message());
  inputs.control_token = *std::move(token);
  absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> credentials =
      ServerCredentialsFor(config.server_tls, "server.tls");
  if (!credentials.ok()) {
    return ConfigError(LocateConfigError(config, credentials.status()).message());
  }
  inputs.credentials = *std::move(credentials);
  return inputs;
}

// One no-loss dead-letter producer when any failure policy uses it.
bool NeedsDeadLetters(const Config& config) {
  if (config.PolicyFor(-1) == FailurePolicy::kDeadLetter) return true;
  for (size_t i = 0; i < config.processors.size(); ++i) {
    if (config.PolicyFor(static_cast<int>(i)) == FailurePolicy::kDeadLetter) return true;
  }
  return false;
}

}  // namespace

// Members are destroyed in reverse order of declaration: every Kafka client
// before the embedded cluster (a client still connected when the cluster
// goes logs librdkafka's "1/1 brokers are down" ERROR), every user of the
// engine before the engine.
struct Server::Components {
  explicit Components(const Config& config_in) : config(config_in) {}

  Config config;
  std::string replica;
  std::unique_ptr<EmbeddedCluster> cluster;
  ConfigInputs inputs;
  std::unique_ptr<ControlLog> control;
  std::unique_ptr<KafkaDeadLetterWriter> dead_letters;
  // Counters and histograms live in one registry, updated as things happen;
  // state gauges are computed when /metrics is scraped.
  std::shared_ptr<prometheus::Registry> registry = std::make_shared<prometheus::Registry>();
  std::unique_ptr<EngineStats> engine_stats;
  std::unique_ptr<ConsumerStats> consumer_stats;
  std::unique_ptr<WorkerPoolStats> worker_stats;
  std::unique_ptr<Engine> engine;
  std::unique_ptr<KafkaConsumer> consumer;
  std::unique_ptr<WorkerPool> workers;
  std::unique_ptr<ControlService> control_service;
  std::unique_ptr<ControlEndpoint> control_endpoint;
  std::unique_ptr<ReflectionService> reflection;
  std::unique_ptr<grpc::Server> grpc_server;
  int grpc_port = 0;
  std::unique_ptr<ReflectionService> health_reflection;  // outlives health_server
  std::unique_ptr<grpc::Server> health_server;
  std::shared_ptr<StateCollector> state_collector;
  std::shared_ptr<ProcessCollector> process_collector;
  std::unique_ptr<MetricsServer> metrics;
  int metrics_port = 0;
  std::thread metrics_stopper;
  std::unique_ptr<EngineTimer> timer;
  std::unique_ptr<Committer> committer;
  std::unique_ptr<ProgressReporter> progress;
  StopSequence stops;
  bool start_called = false;
  bool running = false;
};

absl::Status Server::CheckConfig(const Config& config) {
  return ReadConfigInputs(config).status();
}

absl::StatusOr<std::unique_ptr<Server>> Server::Create(const Config& config) {
  std::unique_ptr<Server> server(new Server(std::make_unique<Components>(config)));
  absl::Status built = server->Build();
  if (!built.ok()) return built;
  return server;
}

Server::Server(std::unique_ptr<Components> components) : c_(std::move(components)) {}

Server::~Server() { Stop(); }

absl::Status Server::Build() {
  Components& c = *c_;
  absl::StatusOr<ConfigInputs> inputs = ReadConfigInputs(c.config);
  if (!inputs.ok()) return inputs.status();
  c.inputs = *std::move(inputs);
  if (c.config.UsesEmbeddedCluster()) {
    absl::StatusOr<std::unique_ptr<EmbeddedCluster>> cluster = EmbeddedCluster::StartFor(c.config);
    if (!cluster.ok()) return StartupError(cluster.status().ToString());
    c.cluster = *std::move(cluster);
  }
  // One name for this replica everywhere (server/replica_identity.h).
  c.replica = ReplicaIdentity(c.config.kafka);
  c.config.kafka["client.id"] = c.replica;
  absl::StatusOr<std::unique_ptr<ControlLog>> control = ControlLog::Create(c.config, c.replica);
  if (!control.ok()) return ConfigError(control.status().message());
  c.control = *std::move(control);
  if (NeedsDeadLetters(c.config)) {
    absl::StatusOr<std::unique_ptr<KafkaDeadLetterWriter>> writer =
        KafkaDeadLetterWriter::Create(c.config.kafka, c.replica);
    if (!writer.ok()) return ConfigError(writer.status().message());
    c.dead_letters = *std::move(writer);
  }
  c.engine_stats = std::make_unique<EngineStats>(*c.registry, c.config);
  c.consumer_stats = std::make_unique<ConsumerStats>(*c.registry);
  c.worker_stats = std::make_unique<WorkerPoolStats>(*c.registry, c.config);
  c.engine = std::make_unique<Engine>(c.config, RealClock::Get(), c.dead_letters.get(),
                                      c.engine_stats.get());
  absl::StatusOr<std::unique_ptr<KafkaConsumer>> consumer = KafkaConsumer::Create(
      c.config, c.engine.get(), c.inputs.decoder.get(), c.consumer_stats.get());
  if (!consumer.ok()) return ConfigError(consumer.status().message());
  c.consumer = *std::move(consumer);
  // Worker channels: credentials are checked now, so a bad `tls:` is a
  // config error before anything starts.
  absl::StatusOr<std::unique_ptr<WorkerPool>> workers =
      WorkerPool::Create(c.config, c.engine.get(), c.worker_stats.get());
  if (!workers.ok()) return ConfigError(workers.status().message());
  c.workers = *std::move(workers);
  // The one place ControlService is built.
  c.control_service = std::make_unique<ControlService>(
      c.config, c.engine.get(), c.consumer.get(), c.control.get(), c.inputs.control_token,
      c.registry.get());
  return absl::OkStatus();
}

absl::Status Server::Start() {
  if (c_->start_called) return absl::FailedPreconditionError("Server::Start called twice");
  c_->start_called = true;
  for (absl::Status (Server::*step)() :
       {&Server::StartControlLog, &Server::StartGrpc, &Server::StartHealthPort,
        &Server::StartMetrics, &Server::StartPipeline}) {
    absl::Status started = (this->*step)();
    if (!started.ok()) return started;
  }
  c_->running = true;
  LogInfo("ferry", "running: group ", c_->config.kafka["group.id"], ", ", c_->config.topics.size(),
          " topics, ", c_->config.processors.size(), " processors, replica ", c_->replica);
  return absl::OkStatus();
}

// Operator commands: the control topic is read before anything is fetched,
// so a pause issued earlier holds from the first record.
absl::Status Server::StartControlLog() {
  Components& c = *c_;
  absl::Status started = c.control->Start();
  if (!started.ok()) {
    return StartupError(absl::StrCat("cannot use the control topic: ", started.ToString()));
  }
  c.stops.Started("control log", [&c] { c.control->Stop(); });  // after the last Control call
  c.consumer->SetControlLog(c.control.get());
  return absl::OkStatus();
}

// ferry's own gRPC server: Control, health and reflection (so grpcurl can
// list and call everything). All three are callback services: a server with
// a synchronous one runs a sync poller thread that, under gRPC's epoll1
// engine, wakes up for the worker streams' I/O too (control_endpoint.h).
absl::Status Server::StartGrpc() {
  Components& c = *c_;
  EnableHealthService();
  c.control_endpoint = std::make_unique<ControlEndpoint>(
      c.control_service.get(), kControlThreads, kControlCallsQueued);
  c.control_endpoint->Start();
  // After the gRPC server's Shutdown, which waits for the calls it handed over.
  c.stops.Started("Control threads", [&c] { c.control_endpoint->Stop(); });
  c.reflection = std::make_unique<ReflectionService>(
      std::vector<std::string>{kControlServiceName, "grpc.health.v1.Health"});
  grpc::ServerBuilder builder;
  builder.AddListeningPort(c.config.listen_address, c.inputs.credentials, &c.grpc_port);
  builder.RegisterService(c.control_endpoint.get());
  builder.RegisterCallbackGenericService(c.reflection.get());
  RemoveSyncReflectionPlugin(builder);
  c.grpc_server = builder.BuildAndStart();
  if (c.grpc_server == nullptr || c.grpc_port == 0) {
    return StartupError(absl::StrCat("cannot listen on ", c.config.listen_address,
                                     " (server.listen): address in use or invalid"));
  }
  c.stops.Started("gRPC server", [&c] {
    c.grpc_server->Shutdown(absl::ToChronoTime(absl::Now() + absl::Seconds(2)));
  });
  SetServing(*c.grpc_server, true);
  LogInfo("ferry", "serving Control, health and reflection on port ", c.grpc_port,
          c.config.server_tls.enabled
              ? (c.config.server_tls.ca_file.empty() ? " over TLS" : " over mTLS")
              : " (plaintext)",
          c.inputs.control_token.empty() ? "; no Control token (control.token_file unset)"
                                         : "; Control requires a bearer token");
  return absl::OkStatus();
}

// Probes that cannot speak TLS (the kubelet's gRPC probe) get a plaintext
// port with nothing but the health service (and reflection describing it).
absl::Status Server::StartHealthPort() {
  Components& c = *c_;
  if (c.config.health_listen_address.empty()) return absl::OkStatus();
  c.health_reflection =
      std::make_unique<ReflectionService>(std::vector<std::string>{"grpc.health.v1.Health"});
  absl::StatusOr<std::unique_ptr<grpc::Server>> started =
      StartPlaintextHealthServer(c.config.health_listen_address, c.health_reflection.get());
  if (!started.ok()) return StartupError(started.status().message());
  c.health_server = *std::move(started);
  c.stops.Started("health port",
                  [&c] { c.health_server->Shutdown(absl::ToChronoTime(absl::Now())); });
  return absl::OkStatus();
}

absl::Status Server::StartMetrics() {
  Components& c = *c_;
  if (c.config.metrics_listen_address.empty()) {
    LogInfo("ferry", "metrics disabled (server.metrics_listen: off)");
    return absl::OkStatus();
  }
  absl::StatusOr<std::unique_ptr<MetricsServer>> started =
      MetricsServer::Start(c.config.metrics_listen_address);
  if (!started.ok()) {
    return StartupError(absl::StrCat(started.status().message(),
                                     " (server.metrics_listen): address in use or invalid; "
                                     "`metrics_listen: off` disables metrics"));
  }
  c.metrics = *std::move(started);
  c.metrics_port = c.metrics->port();
  // Stop() begins stopping the HTTP server before everything else (see
  // there); its turn in the order waits for that.
  c.stops.Started("metrics endpoint", [&c] {
    if (c.metrics_stopper.joinable()) c.metrics_stopper.join();
    c.metrics.reset();  // no scrape reads the engine or the consumer after this
  });
  Engine* engine = c.engine.get();
  KafkaConsumer* consumer = c.consumer.get();
  c.state_collector = std::make_shared<StateCollector>(
      c.config, [engine] { return engine->Snapshot(); },
      [consumer] { return consumer->FetchStates(); }, RealClock::Get());
  c.process_collector = std::make_shared<ProcessCollector>();
  c.metrics->Register(c.registry);
  c.metrics->Register(c.state_collector);
  c.metrics->Register(c.process_collector);
  LogInfo("ferry", "serving metrics on port ", c.metrics_port, " (GET /metrics)");
  return absl::OkStatus();
}

// Worker streams and the dead-letter writer are up before the consumer
// fetches the first record; the consumer is stopped (its commit on revoke)
// before them.
absl::Status Server::StartPipeline() {
  Components& c = *c_;
  c.workers->Start();
  c.stops.Started("worker streams", [&c] { c.workers->Stop(); });
  if (c.dead_letters != nullptr) {
    c.dead_letters->Start();
    c.stops.Started("dead-letter writer", [&c] { c.dead_letters->Stop(); });
  }
  absl::Status started = c.consumer->Start();
  if (!started.ok()) {
    return StartupError(absl::StrCat("cannot start consumer: ", started.ToString()));
  }
  c.stops.Started("consumer", [&c] { c.consumer->Stop(); });  // commit on revoke, leave
  c.timer = std::make_unique<EngineTimer>(c.engine.get());
  c.timer->Start();
  c.stops.Started("engine timer", [&c] { c.timer->Stop(); });
  c.committer = std::make_unique<Committer>(c.engine.get(), c.consumer.get(),
                                            c.config.commit_interval);
  c.committer->Start();
  c.stops.Started("committer", [&c] { c.committer->Stop(); });  // the final commit
  KafkaConsumer* consumer = c.consumer.get();
  c.progress = std::make_unique<ProgressReporter>(
      c.engine.get(), [consumer] { return consumer->HighWatermarks(); },
      c.config.progress_interval);
  c.progress->Start();
  c.stops.Started("progress reporter", [&c] { c.progress->Stop(); });
  return absl::OkStatus();
}

void Server::StopIntake() {
  Components& c = *c_;
  if (!c.running) return;
  c.consumer->StopFetching();
  c.engine->StopDispatching();
}

void Server::Drain(const std::function<bool()>& stop_waiting) {
  Components& c = *c_;
  if (!c.running) return;
  StopIntake();
  // Then readiness, so Kubernetes stops routing to this pod while it drains.
  SetServing(*c.grpc_server, false);
  if (c.health_server != nullptr) SetServing(*c.health_server, false);
  ::ferry::Drain(*c.engine, *c.consumer, c.config.shutdown_grace, stop_waiting);
  if (c.engine->Buffered() > 0) {
    LogInfo("ferry", c.engine->Buffered(), " consumed events stay uncommitted for the next owner");
  }
}

void Server::Stop() {
  Components& c = *c_;
  // Stopping the HTTP server can take up to 2s after a scrape (civetweb's
  // poll quantum), so it begins now, in parallel with the stops before its
  // turn; the metrics stay up through the drain.
  if (c.metrics != nullptr && !c.metrics_stopper.joinable()) {
    c.metrics_stopper = std::thread([&c] { c.metrics.reset(); });
  }
  c.stops.StopAll();
  // Kafka clients are released now; the embedded cluster goes with the
  // Server, after them.
  c.consumer.reset();
  c.control.reset();
  c.running = false;
}

const std::vector<std::string>& Server::started() const { return c_->stops.started(); }
const std::vector<std::string>& Server::stopped() const { return c_->stops.stopped(); }
int Server::grpc_port() const { return c_->grpc_port; }
int Server::metrics_port() const { return c_->metrics_port; }

bool IsConfigError(const absl::Status& status) {
  return status.code() == absl::StatusCode::kInvalidArgument;
}

}  // namespace ferry
