// One ferry.v1.Processor/Process stream on the worker side (the gRPC
// reactor): it announces Ready{max_in_flight, max_run}, reads each message
// into a recycled arena slot, hands an Events message's units (independent
// events and runs, stream_run.h) to the handler pool, honours Cancel,
// batches results into Results and returns credit (inside Results when ferry
// sent the `ferry-results-credit: 1` header, else as Credit messages).
//
// Lifetime: reference counted, one reference for gRPC (dropped in OnDone),
// one per event received (dropped when its result is handed over) and one
// per queued pool task (dropped when it returns). It deletes itself at zero,
// so pool tasks never touch a freed reactor.
// Threading: gRPC reactions and pool threads; everything mutable is under
// mu_ (may_skip_ is an atomic read without it). gRPC operations (StartRead/StartWrite/Finish) are started under mu_;
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
#include "clients/cpp/stream_run.h"
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
  class AsyncMember;  // stream_run.cc

  ~Stream() override = default;

  void EndLocked(grpc::Status status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // The Events message in reading_, as units of work (nullptr: nothing to
  // run); a new slot takes its place for the next read.
  std::shared_ptr<MessageWork> TakeEventsLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  void CancelLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // A pool task: takes the message's units until none is left, then hands
  // its buffered results over. The task's own reference keeps `this`.
  void Work(const std::shared_ptr<MessageWork>& work);

  // Handles unit u's members from `from` on, in order, one at a time, each
  // only after the previous ended OK; the rest are NOT_ATTEMPTED otherwise
  // (stream_run.cc). Returns early when an async member's `done` will
  // continue the unit. Results go to `out`.
  void RunUnit(const std::shared_ptr<MessageWork>& work, size_t u, size_t from,
               ResultBuffer* out);

  // Unit u's members from `from` on, answered NOT_ATTEMPTED.
  static void NotAttempted(const MessageWork& work, size_t u, size_t from, ResultBuffer* out);

  // An async member ended (`ok`: OK and not cancelled); continues its unit
  // on the pool from member `next`.
  void ContinueUnit(std::shared_ptr<MessageWork> work, size_t u, size_t next, bool ok);

  // True when the event must not start: ferry cancelled it or nobody listens.
  bool Skip(uint64_t id);

  // Hands finished events to the stream (one lock for all of them) and
  // drops their references: `this` may be gone when it returns.
  void CompleteAll(std::vector<Completed>* items);
  void Flush(ResultBuffer* out) { CompleteAll(out->items()); }

  // One finished event (async handlers); drops its reference.
  void Complete(uint64_t id, Outcome outcome);

  // Starts the next write, or Finish, when nothing is being written.
  void PumpLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Everything completed since the last write (up to max_results_batch):
  // one Results message (cancelled events excluded) in write_buf_ and
  // Credit{n}, inside the Results when ferry said it takes that, else queued
  // as a message after it. Only while no write is in flight. True: write
  // write_buf_ (false: no result to send, only the queued credit if any).
  bool BatchLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::shared_ptr<Worker::Core> core_;
  const bool results_carry_credit_;  // ferry sent `ferry-results-credit: 1`
  std::atomic<int> refs_{1};  // gRPC's, until OnDone
  // Set (for good) once a Cancel arrived or the stream is ending: until then
  // no event can need skipping and Skip() takes no lock.
  std::atomic<bool> may_skip_{false};

  const std::shared_ptr<SlotPool> slots_ = std::make_shared<SlotPool>();
  std::unique_ptr<ReadSlot> reading_ ABSL_GUARDED_BY(mu_);  // the one outstanding read

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
