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
// Threading: Start/Stop from the owner. Stream reactors run on gRPC's callback
// threads and never block; one internal thread reopens streams after backoff.
#ifndef FERRY_SERVER_WORKER_POOL_H_
#define FERRY_SERVER_WORKER_POOL_H_

#include <grpcpp/grpcpp.h>

#include <memory>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "core/config.h"
#include "core/engine.h"
#include "ferry/v1/processor.grpc.pb.h"
#include "server/worker_pool_stats.h"

namespace ferry {

class WorkerPool {
 public:
  // `stats` may be null; it must outlive the pool.
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
  class StreamReactor;
  struct Slot {
    int processor = 0;
    int index = 0;
    StreamReactor* reactor = nullptr;  // owned by gRPC until OnDone
    int failures = 0;                  // consecutive, for the backoff
    bool reset_sent = false;           // Close() already called for a reset
    absl::Time reopen_at = absl::InfinitePast();
  };

  // Creates the slot's reactor; the caller Begin()s it after dropping mu_.
  StreamReactor* OpenLocked(Slot& slot) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Called by a reactor from OnDone; the reactor is deleted later.
  void OnStreamDone(Slot* slot, bool was_ready, StreamEnd end, StreamReactor* reactor);
  void DeleteFinishedLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ReconnectLoop();

  const Config config_;
  Engine* const engine_;
  WorkerPoolStats* const stats_;
  std::vector<std::shared_ptr<grpc::Channel>> channels_;
  std::vector<std::unique_ptr<ferry::v1::Processor::Stub>> stubs_;
  mutable absl::Mutex mu_;
  std::vector<std::unique_ptr<Slot>> slots_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  int open_streams_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<StreamReactor*> finished_ ABSL_GUARDED_BY(mu_);
  // When each processor's channel last became READY (InfiniteFuture: not).
  std::vector<absl::Time> channel_ready_since_ ABSL_GUARDED_BY(mu_);
  std::thread reconnect_thread_;
  bool started_ = false;
  bool stopped_ = false;
};

}  // namespace ferry

#endif  // FERRY_SERVER_WORKER_POOL_H_
