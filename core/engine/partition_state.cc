#include "core/engine/partition_state.h"

#include "core/common/prefetch.h"

#include <algorithm>
#include <cstddef>

namespace ferry {

bool PartitionState::Begin(int64_t offset, absl::Time consumed_at) {
  if (last_begun_.has_value() && offset <= *last_begun_) return false;
  last_begun_ = offset;
  slots_.push_back(Slot{offset, consumed_at, false});
  return true;
}

bool PartitionState::Done(int64_t offset) {
  if (slots_.empty() || offset < slots_.front().offset) return false;
  // Offsets rise by at least one per slot, so `offset` can be no further
  // than (offset - front) slots in: with no gaps (the usual case) that is
  // exactly where it is; otherwise it is found by bisecting up to there.
  const uint64_t distance = static_cast<uint64_t>(offset - slots_.front().offset);
  const size_t bound = static_cast<size_t>(std::min<uint64_t>(distance, slots_.size() - 1));
  auto it = slots_.begin() + static_cast<std::ptrdiff_t>(bound);
  if (it->offset != offset) {
    it = std::lower_bound(slots_.begin(), it, offset,
                          [](const Slot& slot, int64_t o) { return slot.offset < o; });
  }
  if (it->offset != offset || it->done) return false;
  it->done = true;
  if (it != slots_.begin()) return true;  // the head is still being processed
  while (!slots_.empty() && slots_.front().done) {
    commit_offset_ = slots_.front().offset + 1;
    slots_.pop_front();
  }
  return true;
}

void PartitionState::PrefetchDone(int64_t offset) const {
  if (slots_.empty() || offset < slots_.front().offset) return;
  // Where Done looks first (with no gaps, where the offset is).
  const uint64_t distance = static_cast<uint64_t>(offset - slots_.front().offset);
  const size_t at = static_cast<size_t>(std::min<uint64_t>(distance, slots_.size() - 1));
  PrefetchLine(&slots_[at]);
}

std::optional<int64_t> PartitionState::LowestUnfinished() const {
  if (slots_.empty()) return std::nullopt;
  return slots_.front().offset;
}

std::optional<absl::Time> PartitionState::LowestUnfinishedSince() const {
  if (slots_.empty()) return std::nullopt;
  return slots_.front().consumed_at;
}

void PartitionState::Clear() {
  slots_.clear();
  commit_offset_.reset();
  last_begun_.reset();
}

}  // namespace ferry
