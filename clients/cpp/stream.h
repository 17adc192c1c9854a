// One ferry.v1.Processor/Process stream on the worker side (the gRPC
// reactor): it announces Ready{max_in_flight}, hands each Events message's
// events to the handler pool, honours Cancel, batches results into Results
// and returns credit (inside Results when ferry sent the
// `ferry-results-credit: 1` header, else as Credit messages).
//
// Lifetime: reference counted, one reference for gRPC (dropped in OnDone) and
// one per handler task it scheduled (dropped when that handler completes). It
// deletes itself at zero, so pool tasks never touch a freed reactor.
// Threading: gRPC reactions and pool threads; everything mutable is under
// mu_. gRPC operations (StartRead/StartWrite/Finish) are started under mu_;
// gRPC never runs user reactions inline in those calls. mu_ may be held while
// taking Core::mu, never the reverse.
#ifndef FERRY_CLIENTS_CPP_STREAM_H_
#define FERRY_CLIENTS_CPP_STREAM_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <utility>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "clients/cpp/worker.h"
#include "clients/cpp/worker_core.h"
#include "ferry/v1/processor.grpc.pb.h"

namespace ferry::sdk::internal {

class Stream final
    : public grpc::ServerBidiReactor<ferry::v1::ProcessRequest, ferry::v1::ProcessResponse> {
 public:
  Stream(std::shared_ptr<Worker::Core> core, bool results_carry_credit);

  void Ref() { refs_.fetch_add(1, std::memory_order_relaxed); }
  void Unref();

  void OnReadDone(bool ok) override;

  void OnWriteDone(bool ok) override;

  void OnCancel() override;

  void OnDone() override;

  // Shutdown: finish once every queued message (results) has been written.
  void RequestFinish(grpc::Status status);

 private:
  struct InFlight {
    int count = 0;
    bool cancelled = false;
  };
  struct Completed {
    uint64_t id;
    Outcome outcome;
    bool cancelled;
  };

  // Completes an async handler's event exactly once; reports FAIL if the
  // handler drops `done` without calling it.
  class AsyncDone {
   public:
    AsyncDone(Stream* stream, std::shared_ptr<ferry::v1::Event> event)
        : stream_(stream), event_(std::move(event)) {}
    ~AsyncDone() {
      if (!called_.load(std::memory_order_acquire)) {
        stream_->Complete(event_->id(),
                          Outcome::Fail("async handler dropped its done callback without calling it"));
      }
    }
    void Call(Outcome outcome) {
      if (called_.exchange(true, std::memory_order_acq_rel)) {
        Log("done called more than once for event %d; ignored", event_->id());
        return;
      }
      stream_->Complete(event_->id(), outcome);
    }

   private:
    Stream* const stream_;
    const std::shared_ptr<ferry::v1::Event> event_;  // valid until done
    std::atomic<bool> called_{false};
  };

  ~Stream() override = default;

  void EndLocked(grpc::Status status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  void TakeEventsLocked(std::vector<std::shared_ptr<ferry::v1::Event>>* to_run)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  void CancelLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Runs on a pool thread.
  void Run(const std::shared_ptr<ferry::v1::Event>& ev);

  // A handler finished (any thread). Drops the task's reference.
  void Complete(uint64_t id, const Outcome& outcome);

  // Starts the next write, or Finish, when nothing is being written.
  void PumpLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Everything completed since the last write (up to max_results_batch):
  // one Results message (cancelled events excluded) and Credit{n}, inside
  // the Results when ferry said it takes that, else as a message after it.
  void BatchLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::shared_ptr<Worker::Core> core_;
  const bool results_carry_credit_;  // ferry sent `ferry-results-credit: 1`
  std::atomic<int> refs_{1};  // gRPC's, until OnDone

  ferry::v1::ProcessRequest req_;  // the one outstanding read

  absl::Mutex mu_;
  ferry::v1::ProcessResponse write_buf_ ABSL_GUARDED_BY(mu_);  // the one outstanding write
  std::deque<ferry::v1::ProcessResponse> queue_ ABSL_GUARDED_BY(mu_);
  std::deque<Completed> completed_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<uint64_t, InFlight> inflight_ ABSL_GUARDED_BY(mu_);
  bool write_in_flight_ ABSL_GUARDED_BY(mu_) = false;
  bool ending_ ABSL_GUARDED_BY(mu_) = false;  // peer gone / broken: drop results, finish
  grpc::Status end_status_ ABSL_GUARDED_BY(mu_);
  bool finish_requested_ ABSL_GUARDED_BY(mu_) = false;  // shutdown: flush, then finish
  grpc::Status finish_status_ ABSL_GUARDED_BY(mu_);
  bool finished_ ABSL_GUARDED_BY(mu_) = false;  // Finish() called
  int64_t granted_ ABSL_GUARDED_BY(mu_) = 0;    // credit granted (Ready + Credits)
  int64_t received_ ABSL_GUARDED_BY(mu_) = 0;   // events accepted for processing
  int64_t held_ ABSL_GUARDED_BY(mu_) = 0;       // received, credit not yet returned
};

}  // namespace ferry::sdk::internal

#endif  // FERRY_CLIENTS_CPP_STREAM_H_
