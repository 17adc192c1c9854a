// Runs on the worker side (see "Runs" in proto/ferry/v1/processor.proto):
// one Events message split into units of work, and what a pool task keeps
// while it works through them.
//
//   * MessageWork: a message's events grouped into units. An independent
//     event (run_id 0) is a unit of one; the events sharing a non-zero
//     run_id are one unit, its members in message order. Pool tasks take
//     units in message order; a unit's members are handled one at a time by
//     whoever holds it (Stream::RunUnit in stream_run.cc), so a run keeps its
//     order while independent events and other runs go in parallel.
//   * ReadSlot / SlotPool: where a stream reads a message into. The
//     ProcessRequest lives on an arena with a first block of its own, so
//     parsing a message allocates (almost) nothing; the slot goes with the
//     message's work and back to the pool, reset, when the work is done.
//   * Completed / ResultBuffer: finished events on their way to the stream,
//     handed over several at a time where that delays none of them.
//
// Threading: MessageWork is built on the stream thread and then only read,
// except next_ (atomic); a ResultBuffer belongs to one pool task, a ReadSlot
// to whoever holds it; SlotPool from any thread.
#ifndef FERRY_CLIENTS_CPP_STREAM_RUN_H_
#define FERRY_CLIENTS_CPP_STREAM_RUN_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "clients/cpp/worker.h"
#include "ferry/v1/processor.pb.h"
#include "google/protobuf/arena.h"

namespace ferry::sdk::internal {

// One finished event: its outcome, or NOT_ATTEMPTED (a run member after one
// that did not end OK), or nothing to send (cancelled / skipped, set later
// by the stream from its own records).
struct Completed {
  uint64_t id;
  Outcome outcome;
  bool not_attempted = false;
  bool cancelled = false;  // filled in by the stream: no result is sent
};

class ReadSlot {
 public:
  ReadSlot();
  ReadSlot(const ReadSlot&) = delete;
  ReadSlot& operator=(const ReadSlot&) = delete;

  ferry::v1::ProcessRequest* request() { return request_; }
  // Frees what the last message used (keeping the first block) and starts
  // an empty request.
  void Reset();

 private:
  static constexpr size_t kFirstBlock = 64 << 10;  // a batch of 64 bench events fits
  std::unique_ptr<char[]> first_block_;
  google::protobuf::Arena arena_;
  ferry::v1::ProcessRequest* request_;
};

// Reset slots for a stream's reads, shared with its messages' work (which
// may outlive the stream).
class SlotPool {
 public:
  std::unique_ptr<ReadSlot> Get();
  void Put(std::unique_ptr<ReadSlot> slot);

 private:
  static constexpr size_t kMaxFree = 8;
  absl::Mutex mu_;
  std::vector<std::unique_ptr<ReadSlot>> free_ ABSL_GUARDED_BY(mu_);
};

class MessageWork {
 public:
  // Takes the slot holding an Events message and groups its events into
  // units; gives the slot back to `pool` when destroyed.
  MessageWork(std::unique_ptr<ReadSlot> slot, std::shared_ptr<SlotPool> pool);
  ~MessageWork() { pool_->Put(std::move(slot_)); }
  MessageWork(const MessageWork&) = delete;
  MessageWork& operator=(const MessageWork&) = delete;

  size_t units() const { return starts_.size() - 1; }
  // The next unit for a pool task to handle; >= units() when none is left.
  size_t TakeUnit() { return next_.fetch_add(1, std::memory_order_relaxed); }
  // Unit u's events (indices into the message), in message order.
  absl::Span<const int> members(size_t u) const {
    return absl::MakeConstSpan(order_.data() + starts_[u], starts_[u + 1] - starts_[u]);
  }
  const ferry::v1::Event& event(int i) const { return events_.events(i); }
  int size() const { return events_.events_size(); }

 private:
  const std::shared_ptr<SlotPool> pool_;
  std::unique_ptr<ReadSlot> slot_;
  const ferry::v1::Events& events_;  // in slot_
  std::vector<int> order_;        // event indices, unit by unit
  std::vector<uint32_t> starts_;  // unit u is order_[starts_[u], starts_[u + 1])
  std::atomic<size_t> next_{0};
};

// A pool task's finished events not yet handed to the stream: what ends
// without a handler (NOT_ATTEMPTED, skipped) gathers here and goes in one
// call; a handler's result goes out before the next handler starts, since
// that one may take long and ferry waits for the result (a lane is blocked
// until it arrives).
class ResultBuffer {
 public:
  ResultBuffer() = default;

  void Add(uint64_t id, Outcome outcome, bool not_attempted = false) {
    items_.push_back(Completed{id, std::move(outcome), not_attempted});
  }
  bool empty() const { return items_.empty(); }
  std::vector<Completed>* items() { return &items_; }

 private:
  std::vector<Completed> items_;
};

}  // namespace ferry::sdk::internal

#endif  // FERRY_CLIENTS_CPP_STREAM_RUN_H_
