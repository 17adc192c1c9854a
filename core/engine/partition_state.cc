#include "core/engine/partition_state.h"

#include <algorithm>

namespace ferry {

bool PartitionState::Begin(int64_t offset, absl::Time consumed_at) {
  if (last_begun_.has_value() && offset <= *last_begun_) return false;
  last_begun_ = offset;
  slots_.push_back(Slot{offset, consumed_at, false});
  return true;
}

bool PartitionState::Done(int64_t offset) {
  // Results mostly come back near the front (KEY order, small windows), but
  // a binary search keeps a far one cheap too.
  auto it = std::lower_bound(slots_.begin(), slots_.end(), offset,
                             [](const Slot& slot, int64_t o) { return slot.offset < o; });
  if (it == slots_.end() || it->offset != offset || it->done) return false;
  it->done = true;
  if (it != slots_.begin()) return true;  // the head is still being processed
  while (!slots_.empty() && slots_.front().done) {
    commit_offset_ = slots_.front().offset + 1;
    slots_.pop_front();
  }
  return true;
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
