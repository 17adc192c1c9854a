// RetryQueue: events waiting out the backoff before their next attempt
// (a RETRY result, or a timeout with retry_on_timeout). An event keeps its
// lane's in-flight slot while it waits, so nothing of its key overtakes it.
//
// The wait is the processor's exponential backoff with jitter
// (core/common/backoff.h) for the attempt, or the worker's retry_after_ms
// when longer, which is honoured only up to retry_backoff_max: a worker
// cannot park a key's lane longer than the operator allows.
//
// Threading: not thread-safe; guarded by the Engine's mutex.
#ifndef FERRY_CORE_ENGINE_RETRY_QUEUE_H_
#define FERRY_CORE_ENGINE_RETRY_QUEUE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <optional>

#include "absl/random/random.h"
#include "absl/time/time.h"
#include "core/config/config.h"
#include "core/engine/queued_event.h"
#include "core/engine/types.h"

namespace ferry {

class RetryQueue {
 public:
  // How long attempt `attempt` (the one that just failed, 1 for the first)
  // waits before the next, given the worker's `retry_after_ms`.
  absl::Duration Delay(const ProcessorConfig& processor, int attempt, uint32_t retry_after_ms);
  void Schedule(absl::Time due, QueuedEvent queued) { waiting_.emplace(due, std::move(queued)); }
  // Hands the events due at `now` to `due`, earliest first.
  void PopDue(absl::Time now, const std::function<void(QueuedEvent)>& due);
  // Removes the events matching, handing each to `removed`.
  void RemoveIf(const std::function<bool(const QueuedEvent&)>& match,
                const std::function<void(QueuedEvent)>& removed);
  std::optional<QueuedEvent> TakeOffset(const TopicPartition& tp, int64_t offset);
  int64_t size() const { return static_cast<int64_t>(waiting_.size()); }

 private:
  std::multimap<absl::Time, QueuedEvent> waiting_;
  absl::BitGen random_;
};

}  // namespace ferry

#endif  // FERRY_CORE_ENGINE_RETRY_QUEUE_H_
