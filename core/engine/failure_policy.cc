#include "core/engine/failure_policy.h"

#include <utility>

#include "core/kafka/event_header.h"

namespace ferry {

FailureDecision ResolveFailure(const Config& config, int processor, bool have_writer) {
  FailureDecision decision;
  decision.action = config.PolicyFor(processor);
  if (decision.action != FailurePolicy::kDeadLetter) return decision;
  decision.dead_letter_topic = config.DeadLetterTopicFor(processor);
  if (!have_writer || decision.dead_letter_topic.empty()) {
    decision.action = FailurePolicy::kSkip;
    decision.dead_letter_unavailable = true;
  }
  return decision;
}

DeadLetter MakeDeadLetter(const Config& config, const QueuedEvent& queued,
                          const std::string& topic, const std::string& error) {
  DeadLetter letter;
  letter.dead_letter_topic = topic;
  letter.source_topic = queued.event->topic();
  letter.source_partition = queued.event->partition();
  letter.source_offset = queued.event->offset();
  letter.key = queued.record_key;
  letter.payload = queued.event->payload();
  for (const v1::Header& header : queued.event->headers()) {
    letter.headers.emplace_back(OriginalName(header), header.value());  // as in Kafka
  }
  letter.timestamp_ms = queued.event->timestamp_ms();
  letter.error = error;
  letter.attempts = queued.processor < 0 ? 0 : queued.event->attempt();
  letter.processor = queued.processor < 0 ? "" : config.processors[queued.processor].name;
  return letter;
}

void DeadLetterTracker::Start(QueuedEvent queued, DeadLetter letter) {
  const uint64_t token = next_token_++;
  Pending& pending = pending_[token];
  pending.queued = std::move(queued);
  pending.letter = std::move(letter);
  Write(token);
}

void DeadLetterTracker::Write(uint64_t token) {
  auto it = pending_.find(token);
  if (it == pending_.end()) return;  // forgotten (revoked) while waiting to retry
  writer_->Write(it->second.letter,
                 [written = written_, token](absl::Status status) { written(token, status); });
}

QueuedEvent DeadLetterTracker::Acknowledge(uint64_t token) {
  auto it = pending_.find(token);
  QueuedEvent queued = std::move(it->second.queued);
  pending_.erase(it);
  return queued;
}

void DeadLetterTracker::RewriteDue(absl::Time now) {
  while (!retries_.empty() && retries_.begin()->first <= now) {
    const uint64_t token = retries_.begin()->second;
    retries_.erase(retries_.begin());
    Write(token);
  }
}

void DeadLetterTracker::RemoveIf(const std::function<bool(const QueuedEvent&)>& match,
                                 const std::function<void(const QueuedEvent&)>& removed) {
  for (auto it = pending_.begin(); it != pending_.end();) {
    if (match(it->second.queued)) {
      removed(it->second.queued);
      it = pending_.erase(it);
    } else {
      ++it;
    }
  }
}

int64_t DeadLetterTracker::CountIf(const std::function<bool(const v1::Event&)>& match) const {
  int64_t count = 0;
  for (const auto& [token, pending] : pending_) count += match(*pending.queued.event) ? 1 : 0;
  return count;
}

}  // namespace ferry
