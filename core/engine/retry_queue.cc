#include "core/engine/retry_queue.h"

#include <algorithm>
#include <utility>

#include "core/common/backoff.h"

namespace ferry {

absl::Duration RetryQueue::Delay(const ProcessorConfig& processor, int attempt,
                                 uint32_t retry_after_ms) {
  // retry_after_ms is capped: an answer of 4e9 ms would hold the lane for 49
  // days, outside any timeout.
  const absl::Duration asked =
      std::min(absl::Milliseconds(retry_after_ms), processor.retry_backoff_max);
  const absl::Duration backoff = JitteredBackoff(
      {processor.retry_backoff, processor.retry_backoff_max}, attempt, random_);
  return std::max(asked, backoff);
}

void RetryQueue::PopDue(absl::Time now, const std::function<void(QueuedEvent)>& due) {
  while (!waiting_.empty() && waiting_.begin()->first <= now) {
    QueuedEvent queued = std::move(waiting_.begin()->second);
    waiting_.erase(waiting_.begin());
    due(std::move(queued));
  }
}

void RetryQueue::RemoveIf(const std::function<bool(const QueuedEvent&)>& match,
                          const std::function<void(QueuedEvent)>& removed) {
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    if (match(it->second)) {
      removed(std::move(it->second));
      it = waiting_.erase(it);
    } else {
      ++it;
    }
  }
}

std::optional<QueuedEvent> RetryQueue::TakeOffset(const TopicPartition& tp, int64_t offset) {
  for (auto it = waiting_.begin(); it != waiting_.end(); ++it) {
    if (!it->second.Is(tp, offset)) continue;
    QueuedEvent taken = std::move(it->second);
    waiting_.erase(it);
    return taken;
  }
  return std::nullopt;
}

}  // namespace ferry
