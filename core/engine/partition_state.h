// PartitionState: which offsets of one partition may be committed.
//
// Two min-heaps of offsets (DESIGN §1): `in_flight` gets an offset when its
// Event is created (Begin), `done` gets it when its result is terminal (Done).
// The committable position is the contiguous finished prefix: while both
// heaps have the same top, both are popped and that offset becomes the last
// done offset; a lower in-flight top means the head is still being processed;
// a lower done top is an anomaly (a Done with no matching Begin, e.g. after a
// replay) and is discarded. Offsets that never arrive (compaction,
// transaction markers) never enter a heap, so they never block.
//
// Threading: not thread-safe; the engine guards it with its own mutex.
#ifndef FERRY_CORE_ENGINE_PARTITION_STATE_H_
#define FERRY_CORE_ENGINE_PARTITION_STATE_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <queue>
#include <vector>

namespace ferry {

class PartitionState {
 public:
  // An Event for `offset` was created. Offsets must rise; a Begin at or below
  // the last begun offset (a record read twice without a Clear) is refused
  // and returns false, so one offset is never tracked twice.
  bool Begin(int64_t offset);
  // The Event for `offset` reached a terminal result.
  void Done(int64_t offset);

  // The offset to commit (last contiguous done offset + 1), or nullopt when
  // nothing finished since the state was created or cleared.
  std::optional<int64_t> CommitOffset() const { return commit_offset_; }

  // Offsets begun and not yet popped as committed (includes finished offsets
  // waiting behind an unfinished head).
  size_t Pending() const { return in_flight_.size(); }
  // The lowest offset not yet committable (the commit blocker), if any.
  std::optional<int64_t> LowestUnfinished() const;

  // Forgets everything (on revoke or reset).
  void Clear();

 private:
  void Advance();

  using MinHeap =
      std::priority_queue<int64_t, std::vector<int64_t>, std::greater<int64_t>>;
  MinHeap in_flight_;
  MinHeap done_;
  std::optional<int64_t> commit_offset_;
  std::optional<int64_t> last_begun_;
};

}  // namespace ferry

#endif  // FERRY_CORE_ENGINE_PARTITION_STATE_H_
