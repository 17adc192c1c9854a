#include "core/engine/failure_policy.h"

#include <vector>

#include "core/engine/queued_event_testing.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/mocks/engine_fixtures.h"
#include "tests/mocks/fake_dead_letter_writer.h"

namespace ferry {
namespace {

using ::ferry::testing::EngineTestConfig;
using ::ferry::testing::FakeDeadLetterWriter;
using ::ferry::testing::Queued;
using ::testing::ElementsAre;

const TopicPartition kP0{"t", 0};
const absl::Time kNow = absl::FromUnixSeconds(1000);

TEST(ResolveFailureTest, FollowsThePolicyAndNeverLosesADeadLetterQuietly) {
  const Config block = EngineTestConfig(FailurePolicy::kBlock);
  EXPECT_EQ(ResolveFailure(block, 0, true).action, FailurePolicy::kBlock);
  const Config skip = EngineTestConfig(FailurePolicy::kSkip);
  EXPECT_EQ(ResolveFailure(skip, 0, true).action, FailurePolicy::kSkip);
  EXPECT_FALSE(ResolveFailure(skip, 0, true).dead_letter_unavailable);

  const Config dlq = EngineTestConfig(FailurePolicy::kDeadLetter);
  const FailureDecision decision = ResolveFailure(dlq, 0, true);
  EXPECT_EQ(decision.action, FailurePolicy::kDeadLetter);
  EXPECT_EQ(decision.dead_letter_topic, "dlq");
  // Poison records (no processor) take the global policy.
  EXPECT_EQ(ResolveFailure(dlq, -1, true).action, FailurePolicy::kDeadLetter);
  // Without a writer: skipped, and said so.
  const FailureDecision no_writer = ResolveFailure(dlq, 0, false);
  EXPECT_EQ(no_writer.action, FailurePolicy::kSkip);
  EXPECT_TRUE(no_writer.dead_letter_unavailable);
}

TEST(MakeDeadLetterTest, KeepsTheOriginalRecordAndSaysWhyItFailed) {
  const Config config = EngineTestConfig(FailurePolicy::kDeadLetter);
  QueuedEvent queued = Queued(kP0, 42);
  queued.record_key = std::string("raw-key");
  queued.event->set_payload("body");
  queued.event->set_attempt(3);
  DeadLetter letter = MakeDeadLetter(config, queued, "dlq", "boom");
  EXPECT_EQ(letter.dead_letter_topic, "dlq");
  EXPECT_EQ(letter.source_topic, "t");
  EXPECT_EQ(letter.source_offset, 42);
  EXPECT_EQ(letter.key, "raw-key");
  EXPECT_EQ(letter.payload, "body");
  EXPECT_EQ(letter.attempts, 3);
  EXPECT_EQ(letter.processor, "p");
  EXPECT_EQ(letter.error, "boom");
  queued.processor = -1;  // a poison record: no attempt, no processor
  letter = MakeDeadLetter(config, queued, "dlq", "poison");
  EXPECT_EQ(letter.attempts, 0);
  EXPECT_EQ(letter.processor, "");
}

TEST(DeadLetterTrackerTest, AnEventFinishesOnlyOnceItsLetterIsAcknowledged) {
  FakeDeadLetterWriter writer;
  std::vector<std::pair<uint64_t, bool>> reports;
  DeadLetterTracker tracker(&writer, [&reports](uint64_t token, absl::Status status) {
    reports.emplace_back(token, status.ok());
  });
  const Config config = EngineTestConfig(FailurePolicy::kDeadLetter);
  QueuedEvent queued = Queued(kP0, 7);
  DeadLetter letter = MakeDeadLetter(config, queued, "dlq", "x");
  tracker.Start(std::move(queued), std::move(letter));
  EXPECT_EQ(tracker.size(), 1);
  EXPECT_TRUE(reports.empty());  // never inline

  writer.Complete(absl::UnavailableError("broker down"));
  ASSERT_THAT(reports, ElementsAre(std::make_pair(uint64_t{1}, false)));
  ASSERT_TRUE(tracker.pending(1));
  tracker.RetryLater(1, kNow);
  tracker.RewriteDue(kNow);
  EXPECT_EQ(writer.written().size(), 1u);  // not before the backoff
  tracker.RewriteDue(kNow + DeadLetterTracker::kRetryBackoff);
  EXPECT_EQ(writer.written().size(), 2u);

  writer.Complete();
  EXPECT_EQ(reports.back(), std::make_pair(uint64_t{1}, true));
  EXPECT_EQ(tracker.Acknowledge(1).event->offset(), 7);
  EXPECT_EQ(tracker.size(), 0);
  EXPECT_FALSE(tracker.pending(1));
}

TEST(DeadLetterTrackerTest, RevokedLettersAreForgottenAndNotRewritten) {
  FakeDeadLetterWriter writer;
  DeadLetterTracker tracker(&writer, [](uint64_t, absl::Status) {});
  const Config config = EngineTestConfig(FailurePolicy::kDeadLetter);
  for (int64_t offset : {1, 2}) {
    QueuedEvent queued = Queued({"t", static_cast<int32_t>(offset)}, offset);
    DeadLetter letter = MakeDeadLetter(config, queued, "dlq", "x");
    tracker.Start(std::move(queued), std::move(letter));
  }
  EXPECT_EQ(tracker.CountIf([](const v1::Event& e) { return e.partition() == 1; }), 1);
  tracker.RetryLater(1, kNow);
  std::vector<int64_t> removed;
  tracker.RemoveIf([](const QueuedEvent& q) { return q.event->partition() == 1; },
                   [&removed](const QueuedEvent& q) { removed.push_back(q.event->offset()); });
  EXPECT_THAT(removed, ElementsAre(1));
  tracker.RewriteDue(kNow + absl::Hours(1));
  EXPECT_EQ(writer.written().size(), 2u);  // the forgotten letter is not written again
  EXPECT_EQ(tracker.size(), 1);
}

}  // namespace
}  // namespace ferry
