// One ferry.v1.Processor/Process call on the worker side, served through
// gRPC's async API on the SDK's completion queue: it announces
// Ready{max_in_flight, max_run}, reads each message into a recycled arena
// slot, hands an Events message's units (independent events and runs,
// stream_run.h) to the handler pool, honours Cancel, batches results into
// Results and returns credit (inside Results when ferry sent the
// `ferry-results-credit: 1` header, else as Credit messages).
//
// Why not the callback API: its reactions run on gRPC's own callback
// threads, two of them on a small machine, which hand each message to the
// next and woke three times as often as ferry's one completion loop at the
// same rate. Here one thread, the stream thread (Worker::Service), drains
// the queue and runs every operation's completion, and gRPC polls on it.
//
// Lifetime: reference counted. The call holds one reference until the call
// is over and no operation is pending (then the gRPC state, Call, is freed
// at once, so a server Shutdown never waits on a handler running past
// grace); every event received holds one until its result is handed over,
// and every queued pool task one until it returns. It deletes itself at
// zero, so pool tasks never touch a freed stream.
// Threading: operation completions on the stream thread; events complete on
// pool threads. Everything mutable is under mu_ (may_skip_ is an atomic read
// without it). gRPC operations (Read/Write/Finish) are started under mu_,
// at most one of each kind outstanding. mu_ may be held while taking
// Core::mu, never the reverse.
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

class Stream final {
 public:
  // What the stream thread gets back from the completion queue for every
  // operation: it calls Proceed(ok) and nothing else.
  class Tag {
   public:
    virtual void Proceed(bool ok) = 0;

   protected:
    ~Tag() = default;
  };

  // Asks gRPC for the next Process call on `cq`: a new Stream waits for it
  // and, once it arrives, asks for the one after it. Does nothing once
  // Core::accepting is false (the queue is being shut down).
  static void Accept(std::shared_ptr<Worker::Core> core,
                     ferry::v1::Processor::AsyncService* service,
                     grpc::ServerCompletionQueue* cq);

  void Ref() { refs_.fetch_add(1, std::memory_order_relaxed); }
  void Unref();

  // Shutdown: finish once every queued message (results) has been written.
  void RequestFinish(grpc::Status status);

 private:
  struct InFlight {
    int count = 0;
    bool cancelled = false;
  };
  class AsyncMember;  // stream_run.cc

  // The tag of one kind of operation: calls Stream::*kOnDone.
  template <void (Stream::*kOnDone)(bool)>
  class Operation final : public Tag {
   public:
    explicit Operation(Stream* stream) : stream_(stream) {}
    void Proceed(bool ok) override { (stream_->*kOnDone)(ok); }

   private:
    Stream* const stream_;
  };

  // gRPC's state of the call, freed as soon as the call is over.
  struct Call {
    grpc::ServerContext context;
    grpc::ServerAsyncReaderWriter<ferry::v1::ProcessResponse, ferry::v1::ProcessRequest> io{
        &context};
  };

  Stream(std::shared_ptr<Worker::Core> core, ferry::v1::Processor::AsyncService* service,
         grpc::ServerCompletionQueue* cq);
  ~Stream() = default;

  // Operation completions, on the stream thread.
  void OnAccepted(bool ok);
  void OnReadDone(bool ok);
  void OnWriteDone(bool ok);
  void OnFinishDone(bool ok);
  void OnCallDone(bool ok);  // AsyncNotifyWhenDone: the call is over

  // Ready, the first read and registration in Core::streams (or UNAVAILABLE
  // when the worker is draining).
  void BeginLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void StartReadLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void StartFinishLocked(const grpc::Status& status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Once the call is over and nothing is pending: frees Call, leaves
  // Core::streams and returns true; the caller then drops the call's
  // reference, after releasing mu_.
  bool ReleaseLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  void EndLocked(grpc::Status status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // The Events message in reading_, as units of work (nullptr: nothing to
  // run); a new slot takes its place for the next read.
  std::shared_ptr<MessageWork> TakeEventsLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  void CancelLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Hands a message's units to the pool (or runs them here, with
  // inline_handlers).
  void Dispatch(const std::shared_ptr<MessageWork>& work);

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
  ferry::v1::Processor::AsyncService* const service_;
  grpc::ServerCompletionQueue* const cq_;
  std::atomic<int> refs_{1};  // the call's, until ReleaseLocked
  // Set (for good) once a Cancel arrived or the stream is ending: until then
  // no event can need skipping and Skip() takes no lock.
  std::atomic<bool> may_skip_{false};

  const std::shared_ptr<SlotPool> slots_ = std::make_shared<SlotPool>();
  std::unique_ptr<ReadSlot> reading_ ABSL_GUARDED_BY(mu_);  // the one outstanding read

  absl::Mutex mu_;
  Operation<&Stream::OnAccepted> accepted_op_{this};
  Operation<&Stream::OnReadDone> read_op_{this};
  Operation<&Stream::OnWriteDone> write_op_{this};
  Operation<&Stream::OnFinishDone> finish_op_{this};
  Operation<&Stream::OnCallDone> call_done_op_{this};
  std::unique_ptr<Call> call_ ABSL_GUARDED_BY(mu_) = std::make_unique<Call>();
  bool results_carry_credit_ ABSL_GUARDED_BY(mu_) = false;  // `ferry-results-credit: 1`
  bool registered_ ABSL_GUARDED_BY(mu_) = false;            // in Core::streams
  // Operations gRPC has not completed yet (write_in_flight_ is the write's).
  bool accept_pending_ ABSL_GUARDED_BY(mu_) = true;
  bool read_pending_ ABSL_GUARDED_BY(mu_) = false;
  bool finish_pending_ ABSL_GUARDED_BY(mu_) = false;
  bool call_done_pending_ ABSL_GUARDED_BY(mu_) = false;
  bool call_over_ ABSL_GUARDED_BY(mu_) = false;  // no operation may start
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
