#include "core/engine/event_pool.h"

#include <algorithm>
#include <utility>

namespace ferry {

size_t EventPool::RetainedBytes(const v1::Event& event) {
  return event.topic().capacity() + event.key().capacity() + event.type().capacity() +
         event.payload().capacity();
}

void EventPool::Recycle(std::unique_ptr<v1::Event> event, Limit limit) {
  if (event == nullptr || static_cast<int64_t>(events_.size()) >= limit.events) return;
  const size_t bytes = RetainedBytes(*event);
  if (bytes > kMaxRetainedBytes) return;
  if (retained_bytes_ + static_cast<int64_t>(bytes) > limit.bytes) return;
  // Headers are freed, not kept: a cleared repeated field keeps its
  // elements, which the pool's bound would not see.
  google::protobuf::RepeatedPtrField<v1::Header>().Swap(event->mutable_headers());
  event->Clear();  // keeps the strings' capacities, so `bytes` still holds
  retained_bytes_ += static_cast<int64_t>(bytes);
  events_.push_back(Kept{std::move(event), static_cast<int64_t>(bytes)});
}

void EventPool::TakeInto(size_t count, std::vector<std::unique_ptr<v1::Event>>* out) {
  const size_t taken = std::min(count, events_.size());
  for (size_t i = 0; i < taken; ++i) {
    retained_bytes_ -= events_.back().bytes;
    out->push_back(std::move(events_.back().event));
    events_.pop_back();
  }
}

}  // namespace ferry
