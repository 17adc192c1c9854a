// WorkerPool: ferry's connections to its Processor workers.
//
// For every configured processor it creates one gRPC channel to the target
// (any gRPC name: `dns:///svc:port`, `ipv4:a:p,b:p`, `unix:/path`) with the
// round_robin load-balancing policy, and keeps `streams` Process streams open
// on it. A stream that ends (worker crash, network, server shutdown) hands its
// in-flight events back to the Engine and is reopened after an exponential
// backoff with jitter, so a restarted worker is picked up without operator
// action.
//
// Responses are read as bytes and parsed here: a message that does not parse
// as a ProcessResponse is a protocol error (Engine::OnProtocolError: counted
// in ferry_worker_protocol_errors_total, logged rate-limited, its events
// redelivered) and the call is cancelled at once, so the stream ends like any
// lost stream instead of staying half-dead. Any end of reading (the worker
// finished or half-closed, a transport error) cancels the call too. A stream
// reset for a protocol error is reopened with a growing backoff. Strings a
// worker sends (its name, the status it ends the call with) are sanitized
// (core/common/worker_text.h) before they reach a log line.
//
// With `tls:` on a processor the channel is TLS (server/workers/tls_credentials.h):
// the workers' certificate is verified and, with cert_file/key_file, ferry
// presents a client certificate. A failed handshake is a connect failure
// like any other: the channel retries with backoff. A channel that cannot
// connect is logged with gRPC's last connection error (e.g. `Peer name x is
// not in peer certificate`), when it starts failing and every 30 s after.
//
// Each stream (server/workers/process_stream.h) runs on one of the pool's
// completion loops (server/workers/completion_loop.h): a thread of ferry's
// that polls the stream's socket and handles its reads and writes, one loop
// per four cores.
//
// Threading: Start/Stop from the owner. Streams run on the loops' threads and
// never block; one internal thread reopens streams after backoff.
#ifndef FERRY_SERVER_WORKERS_WORKER_POOL_H_
#define FERRY_SERVER_WORKERS_WORKER_POOL_H_

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <memory>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "core/config/config.h"
#include "core/engine/engine.h"
#include "core/common/log.h"
#include "ferry/v1/processor.grpc.pb.h"
#include "server/workers/completion_loop.h"
#include "server/workers/process_stream.h"
#include "server/workers/worker_pool_stats.h"

namespace ferry {

class WorkerPool final : private ProcessStream::Listener {
 public:
  // Builds every processor's channel credentials. A processor `tls:` whose
  // files cannot be used is an error naming the key, e.g.
  // `processors[0].tls.ca_file: cannot read /x: No such file or directory`:
  // ferry must not start then, as no worker could ever be reached. Nothing
  // is dialed until Start(). `stats` may be null; it must outlive the pool.
  static absl::StatusOr<std::unique_ptr<WorkerPool>> Create(const Config& config, Engine* engine,
                                                            WorkerPoolStats* stats = nullptr);
  // Prefer Create(). With this constructor the credentials are built in
  // Start(), which can only log a failure (and then dials nothing).
  WorkerPool(const Config& config, Engine* engine, WorkerPoolStats* stats = nullptr);
  ~WorkerPool();

  // Creates the channels; streams open in the background once a channel is
  // READY (an unreachable worker is retried, not an error).
  void Start();
  // Closes every stream and waits for them to finish. Idempotent.
  void Stop();

  // Streams currently open (for status and tests).
  int OpenStreams() const;

 private:
  struct Slot {
    int processor = 0;
    int index = 0;
    ProcessStream* stream = nullptr;  // owned by the slot until OnStreamDone
    int failures = 0;                  // consecutive, for the backoff
    bool reset_sent = false;           // Close() already called for a reset
    absl::Time reopen_at = absl::InfinitePast();
  };

  // Creates the slot's stream; the caller Begin()s it after dropping mu_.
  ProcessStream* OpenLocked(Slot& slot) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // ProcessStream::Listener. The stream is deleted later, by the reconnect
  // thread.
  void OnStreamDone(ProcessStream* stream, bool was_ready, StreamEnd end) override;
  bool AllowMessageLog(int64_t* suppressed) override;
  void DeleteFinishedLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ReconnectLoop();

  // One per processor; see Create().
  absl::Status BuildCredentials();
  // Logs why `processor`'s channel cannot connect. Called without mu_.
  struct ConnectProbe;
  void StartConnectProbe(int processor);

  const Config config_;
  Engine* const engine_;
  WorkerPoolStats* const stats_;
  std::vector<std::shared_ptr<grpc::ChannelCredentials>> credentials_;
  std::vector<std::shared_ptr<grpc::Channel>> channels_;
  // Processor.Process with requests and responses as bytes.
  using ProcessStub = ProcessStream::Stub;
  std::vector<std::unique_ptr<ProcessStub>> stubs_;
  // Started in Start(), stopped last in Stop().
  std::vector<std::unique_ptr<CompletionLoop>> loops_;
  size_t next_loop_ ABSL_GUARDED_BY(mu_) = 0;
  mutable absl::Mutex mu_;
  std::vector<std::unique_ptr<Slot>> slots_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  int open_streams_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<ProcessStream*> finished_ ABSL_GUARDED_BY(mu_);
  // When each processor's channel last became READY (InfiniteFuture: not).
  std::vector<absl::Time> channel_ready_since_ ABSL_GUARDED_BY(mu_);
  // When each processor's channel started failing to connect
  // (InfiniteFuture: it is not), and when that is next logged.
  std::vector<absl::Time> failing_since_ ABSL_GUARDED_BY(mu_);
  std::vector<absl::Time> next_failure_log_ ABSL_GUARDED_BY(mu_);
  int probes_in_flight_ ABSL_GUARDED_BY(mu_) = 0;
  // Lines a worker can cause per message (empty responses).
  LogRateLimiter message_log_limiter_ ABSL_GUARDED_BY(mu_){10, absl::Seconds(10)};
  std::thread reconnect_thread_;
  bool started_ = false;
  bool stopped_ = false;
};

}  // namespace ferry

#endif  // FERRY_SERVER_WORKERS_WORKER_POOL_H_
