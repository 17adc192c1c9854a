// PartitionState: which offsets of one partition may be committed.
//
// One list of the offsets begun and not yet committable, in offset order,
// each with a done mark and the time it was consumed (DESIGN §1). Begin
// appends (offsets only rise); Done marks its offset and then pops the done
// prefix, whose last offset + 1 becomes the committable position. The front
// of the list is therefore always unfinished: it is the commit blocker. A
// Done for an offset not in the list (never begun, begun after the Done,
// already committed, or from before a Clear) is discarded: it must neither
// commit nor mark an offset that is begun later. Offsets that never arrive
// (compaction, transaction markers) never enter the list, so they never
// block.
//
// One list instead of heaps of begun and done offsets plus a list of
// consumption times: per event it is one append, one binary search and
// usually one pop at the front, with no allocation in the steady state.
//
// Threading: not thread-safe; the engine guards it with its own mutex.
#ifndef FERRY_CORE_ENGINE_PARTITION_STATE_H_
#define FERRY_CORE_ENGINE_PARTITION_STATE_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>

#include "absl/time/time.h"

namespace ferry {

class PartitionState {
 public:
  // An Event for `offset` was created (consumed at `consumed_at`). Offsets
  // must rise; a Begin at or below the last begun offset (a record read twice
  // without a Clear) is refused and returns false, so one offset is never
  // tracked twice.
  bool Begin(int64_t offset, absl::Time consumed_at = absl::InfinitePast());
  // The Event for `offset` reached a terminal result. False (and nothing
  // changes) when `offset` is not begun and unfinished.
  bool Done(int64_t offset);
  // Asks the CPU for the line Done(offset) will touch (core/common/prefetch.h).
  void PrefetchDone(int64_t offset) const;

  // The offset to commit (last contiguous done offset + 1), or nullopt when
  // nothing finished since the state was created or cleared.
  std::optional<int64_t> CommitOffset() const { return commit_offset_; }

  // Offsets begun and not yet popped as committed (includes finished offsets
  // waiting behind an unfinished head).
  size_t Pending() const { return slots_.size(); }
  // The lowest offset not yet committable (the commit blocker), if any.
  std::optional<int64_t> LowestUnfinished() const;
  // When the commit blocker was consumed, if there is one.
  std::optional<absl::Time> LowestUnfinishedSince() const;

  // Forgets everything (on revoke or reset).
  void Clear();

 private:
  struct Slot {
    int64_t offset;
    absl::Time consumed_at;
    bool done;
  };
  std::deque<Slot> slots_;  // rising offsets; the front is never done
  std::optional<int64_t> commit_offset_;
  std::optional<int64_t> last_begun_;
};

}  // namespace ferry

#endif  // FERRY_CORE_ENGINE_PARTITION_STATE_H_
