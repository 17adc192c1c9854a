#include "core/engine/partition_state.h"

namespace ferry {

bool PartitionState::Begin(int64_t offset) {
  if (last_begun_.has_value() && offset <= *last_begun_) return false;
  last_begun_ = offset;
  in_flight_.push(offset);
  return true;
}

void PartitionState::Done(int64_t offset) {
  done_.push(offset);
  Advance();
}

void PartitionState::Advance() {
  while (!in_flight_.empty() && !done_.empty()) {
    const int64_t head = in_flight_.top();
    const int64_t finished = done_.top();
    if (head == finished) {
      in_flight_.pop();
      done_.pop();
      commit_offset_ = head + 1;
    } else if (head < finished) {
      return;  // the head is still being processed
    } else {
      done_.pop();  // a Done below every in-flight offset: stale, discard
    }
  }
}

std::optional<int64_t> PartitionState::LowestUnfinished() const {
  if (in_flight_.empty()) return std::nullopt;
  return in_flight_.top();
}

void PartitionState::Clear() {
  in_flight_ = MinHeap();
  done_ = MinHeap();
  commit_offset_.reset();
  last_begun_.reset();
}

}  // namespace ferry
