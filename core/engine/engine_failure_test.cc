// The Engine when results are not OK, with a fake clock and fake worker
// streams: retries and their backoff, deadlines, terminal failures and the
// failure policy (dead letter, skip, block).
#include <optional>
#include <string>
#include <vector>

#include "core/engine/engine.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/mocks/engine_fixtures.h"

namespace ferry::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

class EngineFailureTest : public ::testing::Test, public EngineHarness {
 protected:
  EngineFailureTest() : EngineHarness(EngineTestConfig(), TwoPartitions(), DeadLetters::kNone) {}
};

TEST_F(EngineFailureTest, RetryStaysAtTheHeadOfItsLane) {
  FakeWorkerStream stream("s");
  const int64_t id = Connect(*engine_, stream, 100);
  engine_->Submit(MakeEvent(0, 0, "a"), 10);
  engine_->Submit(MakeEvent(0, 1, "a"), 10);
  v1::Event sent = stream.TakeHeld()[0];
  EXPECT_EQ(sent.attempt(), 1);
  engine_->OnResults(id, ResultFor(sent.id(), v1::Result::RETRY));
  // Backing off: neither the retry nor the next event of its key goes yet.
  engine_->OnTimer();
  EXPECT_THAT(stream.held(), IsEmpty());
  clock_.Advance(absl::Milliseconds(100));
  engine_->OnTimer();
  std::vector<v1::Event> again = stream.TakeHeld();
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].offset(), 0);
  EXPECT_EQ(again[0].attempt(), 2);
  EXPECT_NE(again[0].id(), sent.id());
}

TEST_F(EngineFailureTest, RetriesExhaustedIsATerminalFailure) {
  FakeWorkerStream stream("s");
  const int64_t id = Connect(*engine_, stream, 100);
  engine_->Submit(MakeEvent(0, 0, "a"), 10);
  for (int attempt = 1; attempt <= 3; ++attempt) {
    clock_.Advance(absl::Seconds(2));
    engine_->OnTimer();
    std::vector<v1::Event> sent = stream.TakeHeld();
    ASSERT_EQ(sent.size(), 1u) << "attempt " << attempt;
    EXPECT_EQ(sent[0].attempt(), attempt);
    engine_->OnResults(id, ResultFor(sent[0].id(), v1::Result::RETRY));
  }
  EXPECT_THAT(stream.held(), IsEmpty());
  EXPECT_EQ(engine_->Snapshot().counters.failed, 1);
  EXPECT_EQ(CommitOffset(*engine_, 0), 1);
}

TEST_F(EngineFailureTest, FailIsTerminalAndFinishesTheOffset) {
  FakeWorkerStream stream("s");
  const int64_t id = Connect(*engine_, stream, 100);
  engine_->Submit(MakeEvent(0, 0, "a"), 10);
  engine_->OnResults(id, ResultFor(stream.TakeHeld()[0].id(), v1::Result::FAIL, "bad"));
  EXPECT_EQ(engine_->Snapshot().counters.failed, 1);
  EXPECT_EQ(CommitOffset(*engine_, 0), 1);
  EXPECT_EQ(engine_->Buffered(), 0);
}

TEST_F(EngineFailureTest, DeadlinePassedCancelsAndFinishes) {
  FakeWorkerStream stream("s");
  const int64_t id = Connect(*engine_, stream, 100);
  engine_->Submit(MakeEvent(0, 0, "a"), 10);
  const uint64_t event_id = stream.TakeHeld()[0].id();
  engine_->OnTimer();
  EXPECT_THAT(stream.cancelled(), IsEmpty());
  clock_.Advance(absl::Seconds(11));
  engine_->OnTimer();
  EXPECT_THAT(stream.cancelled(), ElementsAre(event_id));
  EXPECT_EQ(engine_->Snapshot().counters.timed_out, 1);
  EXPECT_EQ(CommitOffset(*engine_, 0), 1);
  engine_->OnResults(id, ResultFor(event_id, v1::Result::OK));  // late
  EXPECT_EQ(engine_->Snapshot().counters.stale_results, 1);
}

TEST_F(EngineFailureTest, BackoffGrowsAndHonoursRetryAfter) {
  FakeWorkerStream stream("s");
  const int64_t id = Connect(*engine_, stream, 100);
  engine_->Submit(MakeEvent(0, 0, "a"), 10);
  v1::Results retry = ResultFor(stream.TakeHeld()[0].id(), v1::Result::RETRY);
  retry.mutable_results(0)->set_retry_after_ms(700);
  engine_->OnResults(id, retry);
  clock_.Advance(absl::Milliseconds(690));
  engine_->OnTimer();
  EXPECT_THAT(stream.held(), IsEmpty());  // the worker asked for 700ms
  clock_.Advance(absl::Milliseconds(10));
  engine_->OnTimer();
  ASSERT_EQ(stream.held().size(), 1u);
  // Second retry: backoff 100ms * 2 = 200ms, jittered into [100ms, 200ms].
  engine_->OnResults(id, ResultFor(stream.TakeHeld()[0].id(), v1::Result::RETRY));
  clock_.Advance(absl::Milliseconds(99));
  engine_->OnTimer();
  EXPECT_THAT(stream.held(), IsEmpty());
  clock_.Advance(absl::Milliseconds(101));
  engine_->OnTimer();
  EXPECT_EQ(stream.held().size(), 1u);
}

TEST_F(EngineFailureTest, RetryAfterIsCappedAtTheMaximumBackoff) {
  // A hostile or buggy worker asks for 4e9 ms (49 days): the key's lane must
  // not be parked past retry_backoff_max.
  FakeWorkerStream stream("s");
  const int64_t id = Connect(*engine_, stream, 100);
  engine_->Submit(MakeEvent(0, 0, "a"), 10);
  v1::Results retry = ResultFor(stream.TakeHeld()[0].id(), v1::Result::RETRY);
  retry.mutable_results(0)->set_retry_after_ms(4000000000u);
  engine_->OnResults(id, retry);
  const absl::Duration max = EngineTestConfig().processors[0].retry_backoff_max;
  clock_.Advance(max - absl::Milliseconds(1));
  engine_->OnTimer();
  EXPECT_THAT(stream.held(), IsEmpty());
  clock_.Advance(absl::Milliseconds(1));
  engine_->OnTimer();
  ASSERT_EQ(stream.held().size(), 1u);
  EXPECT_EQ(stream.held()[0].attempt(), 2);
}

// Protocol errors (results or credit before Ready, unknown statuses, bytes
// that do not parse) are tested in engine_stream_test.cc.

TEST_F(EngineFailureTest, UnspecifiedStatusCountsAsFail) {
  FakeWorkerStream stream("s");
  const int64_t id = Connect(*engine_, stream, 10);
  engine_->Submit(MakeEvent(0, 0, "a"), 1);
  engine_->OnResults(id, ResultFor(stream.TakeHeld()[0].id(), v1::Result::STATUS_UNSPECIFIED));
  EXPECT_EQ(engine_->Snapshot().counters.failed, 1);
  EXPECT_EQ(CommitOffset(*engine_, 0), 1);
}

TEST_F(EngineFailureTest, RetryOnTimeoutRetriesInsteadOfFailing) {
  Config config = EngineTestConfig();
  config.processors[0].retry_on_timeout = true;
  Engine& engine = Start(config, {{"t", 0}}, DeadLetters::kNone);
  FakeWorkerStream stream("s");
  engine.OnReady(engine.AddStream(0, &stream), 10);
  engine.Submit(MakeEvent(0, 0, "a"), 1);
  stream.TakeHeld();
  clock_.Advance(absl::Seconds(11));
  engine.OnTimer();
  EXPECT_EQ(engine.Snapshot().counters.timed_out, 1);
  EXPECT_EQ(engine.Snapshot().counters.failed, 0);
  clock_.Advance(absl::Seconds(1));
  engine.OnTimer();
  std::vector<v1::Event> again = stream.TakeHeld();
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].attempt(), 2);
}

class FailurePolicyTest : public ::testing::Test, public EngineHarness {
 protected:
  static Config WithPolicy(FailurePolicy policy) {
    Config config = EngineTestConfig();
    config.on_failure = policy;
    config.dead_letter_topic = "dlq";
    return config;
  }
  void Start(FailurePolicy policy) {
    EngineHarness::Start(WithPolicy(policy), {{"t", 0}});
    stream_id_ = Connect(*engine_, stream_, 100);
  }
  void FailHead(const std::string& message) {
    std::vector<v1::Event> sent = stream_.TakeHeld();
    ASSERT_FALSE(sent.empty());
    engine_->OnResults(stream_id_, ResultFor(sent[0].id(), v1::Result::FAIL, message));
  }
  FakeWorkerStream stream_{"s"};
  int64_t stream_id_ = 0;
};

TEST_F(FailurePolicyTest, DeadLetterCountsDoneOnlyAfterTheWriteIsAcknowledged) {
  Start(FailurePolicy::kDeadLetter);
  v1::Event event = MakeEvent(0, 0, "order-1");
  event.set_payload("body");
  v1::Header* header = event.add_headers();
  header->set_key("h");
  header->set_value("v");
  engine_->Submit(event, 10, std::string("record-key"));
  engine_->Submit(MakeEvent(0, 1, "order-1"), 10);
  FailHead("bad order");
  ASSERT_EQ(writer_.written().size(), 1u);
  const DeadLetter& letter = writer_.written()[0];
  EXPECT_EQ(letter.dead_letter_topic, "dlq");
  EXPECT_EQ(letter.source_topic, "t");
  EXPECT_EQ(letter.source_offset, 0);
  EXPECT_EQ(letter.key, std::optional<std::string>("record-key"));
  EXPECT_EQ(letter.payload, "body");
  EXPECT_EQ(letter.error, "bad order");
  EXPECT_EQ(letter.attempts, 1);
  EXPECT_EQ(letter.processor, "p");
  ASSERT_EQ(letter.headers.size(), 1u);
  // The key's next event may go on, but nothing commits before the write.
  EXPECT_EQ(stream_.held().size(), 1u);
  EXPECT_EQ(CommitOffset(*engine_), std::nullopt);
  writer_.Complete(absl::UnavailableError("broker down"));
  EXPECT_EQ(CommitOffset(*engine_), std::nullopt);
  EXPECT_EQ(engine_->Snapshot().counters.dead_letter_errors, 1);
  // Retried after its backoff, then acknowledged.
  clock_.Advance(absl::Seconds(1));
  engine_->OnTimer();
  ASSERT_EQ(writer_.pending(), 1u);
  writer_.Complete();
  EXPECT_EQ(CommitOffset(*engine_), 1);
  EXPECT_EQ(engine_->Snapshot().counters.dead_lettered, 1);
}

TEST_F(FailurePolicyTest, SkipFinishesAtOnce) {
  Start(FailurePolicy::kSkip);
  engine_->Submit(MakeEvent(0, 0, "a"), 10);
  FailHead("bad");
  EXPECT_TRUE(writer_.written().empty());
  EXPECT_EQ(CommitOffset(*engine_), 1);
  EXPECT_EQ(engine_->Snapshot().counters.skipped, 1);
}

TEST_F(FailurePolicyTest, BlockHoldsThePartitionAndItsLane) {
  Start(FailurePolicy::kBlock);
  const uint64_t generation = engine_->BlockedGeneration();
  engine_->Submit(MakeEvent(0, 0, "a"), 10);
  engine_->Submit(MakeEvent(0, 1, "a"), 10);
  FailHead("bad");
  EXPECT_THAT(stream_.held(), IsEmpty());  // the key's next event waits
  EXPECT_EQ(CommitOffset(*engine_), std::nullopt);
  EXPECT_NE(engine_->BlockedGeneration(), generation);
  std::vector<TopicPartition> blocked = engine_->BlockedPartitions();
  ASSERT_EQ(blocked.size(), 1u);
  EXPECT_EQ(blocked[0].partition, 0);
  // A revoke releases it.
  engine_->OnRevoked({{"t", 0}});
  EXPECT_TRUE(engine_->BlockedPartitions().empty());
  EXPECT_EQ(engine_->Buffered(), 0);
}

TEST_F(FailurePolicyTest, PoisonRecordsTakeThePolicyAndNeverStall) {
  Start(FailurePolicy::kDeadLetter);
  RawRecord poison;
  poison.topic = "t";
  poison.partition = 0;
  poison.offset = 0;
  poison.key = "k";
  poison.payload = "not json";
  engine_->SubmitPoison(poison, "type: payload is not JSON");
  engine_->Submit(MakeEvent(0, 1, "a"), 10);
  ASSERT_EQ(writer_.written().size(), 1u);
  EXPECT_EQ(writer_.written()[0].attempts, 0);
  EXPECT_EQ(writer_.written()[0].payload, "not json");
  EXPECT_EQ(stream_.held().size(), 1u);  // the partition moves on
  writer_.Complete();
  EXPECT_EQ(CommitOffset(*engine_), 1);
  EXPECT_EQ(engine_->Snapshot().counters.poison, 1);
}

TEST_F(FailurePolicyTest, RevokeForgetsPendingDeadLetters) {
  Start(FailurePolicy::kDeadLetter);
  engine_->Submit(MakeEvent(0, 0, "a"), 10);
  FailHead("bad");
  engine_->OnRevoked({{"t", 0}});
  EXPECT_EQ(engine_->Buffered(), 0);
  writer_.Complete();  // a late acknowledgement changes nothing
  EXPECT_EQ(engine_->Buffered(), 0);
  EXPECT_EQ(engine_->Snapshot().counters.dead_lettered, 0);
}

}  // namespace
}  // namespace ferry::testing
