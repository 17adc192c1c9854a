// Failure policy: what a terminal failure (FAIL, attempts used up, timeout,
// poison record, unroutable type, redelivery limit) becomes, and the dead
// letters being written.
//
//   * ResolveFailure: the processor's on_failure — block (its partition holds
//     until an operator acts), dlq (written to the dead-letter topic, done only
//     once Kafka acknowledges it) or skip (done now). A dlq without a writer
//     or topic (config validation prevents it) is skipped, never lost quietly.
//   * DeadLetterTracker: the dead letters being written, by token; a failed
//     write is tried again after kRetryBackoff, the event staying unfinished
//     (its offset not committable) until one succeeds.
//
// Threading: ResolveFailure is pure. DeadLetterTracker is not thread-safe:
// guarded by the Engine's mutex. It calls DeadLetterWriter::Write under that
// mutex (the writer never calls back inline); the writer later calls the
// `written` function given at construction on its own thread, which must
// take the mutex before it touches the tracker again.
#ifndef FERRY_CORE_ENGINE_FAILURE_POLICY_H_
#define FERRY_CORE_ENGINE_FAILURE_POLICY_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "core/config/config.h"
#include "core/engine/dead_letter.h"
#include "core/engine/queued_event.h"

namespace ferry {

struct FailureDecision {
  FailurePolicy action = FailurePolicy::kSkip;
  std::string dead_letter_topic;  // for kDeadLetter
  // on_failure is dlq but there is no writer or topic: skipped instead.
  bool dead_letter_unavailable = false;
};

// `processor` may be -1 (poison or unroutable records: the global default).
FailureDecision ResolveFailure(const Config& config, int processor, bool have_writer);

// The dead letter of `queued` for `topic` (the original record plus where it
// came from and why it failed).
DeadLetter MakeDeadLetter(const Config& config, const QueuedEvent& queued,
                          const std::string& topic, const std::string& error);

class DeadLetterTracker {
 public:
  using Written = std::function<void(uint64_t token, absl::Status status)>;
  static constexpr absl::Duration kRetryBackoff = absl::Seconds(1);

  // `writer` may be null when no policy uses a dead-letter topic (then Start
  // must not be called).
  DeadLetterTracker(DeadLetterWriter* writer, Written written)
      : writer_(writer), written_(std::move(written)) {}

  // Writes `letter` for `queued`, which stays pending until acknowledged.
  void Start(QueuedEvent queued, DeadLetter letter);
  bool pending(uint64_t token) const { return pending_.count(token) > 0; }
  // The write of `token` failed: write it again at `now + kRetryBackoff`.
  void RetryLater(uint64_t token, absl::Time now) {
    retries_.emplace(now + kRetryBackoff, token);
  }
  // The write of `token` (pending) succeeded: its event, now finished.
  QueuedEvent Acknowledge(uint64_t token);
  // Writes again the letters whose retry is due.
  void RewriteDue(absl::Time now);
  // Forgets the letters whose event matches (their partition was revoked or
  // reset: the records are read again), handing each event to `removed`.
  void RemoveIf(const std::function<bool(const QueuedEvent&)>& match,
                const std::function<void(const QueuedEvent&)>& removed);
  int64_t size() const { return static_cast<int64_t>(pending_.size()); }
  int64_t CountIf(const std::function<bool(const v1::Event&)>& match) const;

 private:
  struct Pending {
    QueuedEvent queued;
    DeadLetter letter;
  };
  void Write(uint64_t token);

  DeadLetterWriter* const writer_;
  const Written written_;
  std::map<uint64_t, Pending> pending_;
  std::multimap<absl::Time, uint64_t> retries_;
  uint64_t next_token_ = 1;
};

}  // namespace ferry

#endif  // FERRY_CORE_ENGINE_FAILURE_POLICY_H_
