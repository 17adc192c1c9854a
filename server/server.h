// Server: ferry's composition root. It builds every component from the
// Config, starts them in the order of the data flow's dependencies, drains on
// shutdown and stops them in reverse order of startup (server/README.md has
// the orders and the threads).
//
//   Create  every fallible construction step: the decoder, the Control token,
//           the server's TLS credentials, the embedded cluster (no
//           kafka.bootstrap.servers), the control log, the dead-letter writer,
//           the engine, the consumer, the worker pool. Nothing fetches or
//           dials yet.
//   Start   control log reader → gRPC server (Control, health, reflection) →
//           health port → metrics endpoint → worker streams → dead-letter
//           writer → consumer → engine timer → committer → progress reporter.
//   StopIntake  nothing new is fetched or dispatched (a shutdown signal's
//           first act, before anything that may block, such as logging).
//   Drain   StopIntake, readiness to NOT_SERVING, then server/drain.h: waits
//           for what workers have, up to the grace period.
//   Stop    everything Start started, last started first (a final commit,
//           leaving the group, closing worker streams, ...). Idempotent; also
//           after a Start that failed half way.
//
// Errors, one way: a Status whose message is ready to print. InvalidArgument
// (IsConfigError) means the configuration cannot work (ferry exits 2, "invalid
// config"); any other code means ferry could not start with it (exit 3).
//
// Threading: Create, Start, StopIntake, Drain, Stop and destruction from one owner thread
// (main's). The components run their own threads (README.md); the Server
// owns every one of them and joins them in Stop. Destruction stops.
#ifndef FERRY_SERVER_SERVER_H_
#define FERRY_SERVER_SERVER_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/config/config.h"

namespace ferry {

class Server {
 public:
  // The checks `ferry --check_config` runs beyond parsing: the topics'
  // decoders, control.token_file and the server.tls files. Touches no network.
  static absl::Status CheckConfig(const Config& config);

  static absl::StatusOr<std::unique_ptr<Server>> Create(const Config& config);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Starts serving and consuming. On an error what had started keeps running
  // until Stop (or destruction).
  absl::Status Start();
  // After Start: from now on nothing is fetched or dispatched. Idempotent.
  void StopIntake();
  // Call once, after Start, before Stop. `stop_waiting` (polled) ends the
  // wait for in-flight events early.
  void Drain(const std::function<bool()>& stop_waiting);
  void Stop();

  // The components by name, in the order they started and stopped.
  const std::vector<std::string>& started() const;
  const std::vector<std::string>& stopped() const;
  // The bound ports (0 before Start, or when off).
  int grpc_port() const;
  int metrics_port() const;

 private:
  struct Components;
  explicit Server(std::unique_ptr<Components> components);
  absl::Status Build();
  absl::Status StartControlLog();
  absl::Status StartGrpc();
  absl::Status StartHealthPort();
  absl::Status StartMetrics();
  absl::Status StartPipeline();

  // Private state lives in server.cc: this header names no component.
  std::unique_ptr<Components> c_;
};

// True when `status` says the configuration is unusable (exit code 2).
bool IsConfigError(const absl::Status& status);

}  // namespace ferry

#endif  // FERRY_SERVER_SERVER_H_
