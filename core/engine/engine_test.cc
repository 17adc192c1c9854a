#include "core/engine/engine.h"

#include <optional>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/mocks/engine_fixtures.h"
#include "tests/mocks/fake_clock.h"
#include "tests/mocks/fake_dead_letter_writer.h"
#include "tests/mocks/fake_worker_stream.h"

namespace ferry {
namespace {

using ::ferry::testing::CommitOffset;
using ::ferry::testing::Connect;
using ::ferry::testing::EngineTestConfig;
using ::ferry::testing::FakeClock;
using ::ferry::testing::FakeDeadLetterWriter;
using ::ferry::testing::FakeWorkerStream;
using ::ferry::testing::MakeEvent;
using ::ferry::testing::Offsets;
using ::ferry::testing::ResultFor;
using ::testing::ElementsAre;
using ::testing::IsEmpty;

class EngineTest : public ::testing::Test {
 protected:
  explicit EngineTest(Config config = EngineTestConfig()) : engine_(config, &clock_) {
    engine_.OnAssigned({{"t", 0}, {"t", 1}});
  }

  FakeClock clock_;
  Engine engine_;
};

TEST_F(EngineTest, NothingIsSentBeforeReady) {
  FakeWorkerStream stream("s");
  const int64_t id = engine_.AddStream(0, &stream);
  engine_.Submit(MakeEvent(0, 0, "a"), 10);
  EXPECT_THAT(stream.held(), IsEmpty());
  engine_.OnReady(id, 10);
  EXPECT_THAT(Offsets(stream.held()), ElementsAre(0));
}

TEST_F(EngineTest, OneKeyHasOneEventInFlightAndKeepsOrder) {
  FakeWorkerStream stream("s");
  const int64_t id = Connect(engine_, stream, 100);
  engine_.Submit(MakeEvent(0, 0, "a"), 10);
  engine_.Submit(MakeEvent(0, 1, "a"), 10);
  engine_.Submit(MakeEvent(0, 2, "b"), 10);
  engine_.Submit(MakeEvent(0, 3, "a"), 10);
  std::vector<v1::Event> sent = stream.TakeHeld();
  ASSERT_THAT(Offsets(sent), ElementsAre(0, 2));
  engine_.OnResults(id, ResultFor(sent[0].id(), v1::Result::OK));
  sent = stream.TakeHeld();
  ASSERT_THAT(Offsets(sent), ElementsAre(1));
  engine_.OnResults(id, ResultFor(sent[0].id(), v1::Result::OK));
  EXPECT_THAT(Offsets(stream.TakeHeld()), ElementsAre(3));
}

TEST_F(EngineTest, CreditIsNeverExceeded) {
  FakeWorkerStream stream("s");
  const int64_t id = Connect(engine_, stream, 2);
  for (int i = 0; i < 10; ++i) engine_.Submit(MakeEvent(0, i, "k" + std::to_string(i)), 10);
  EXPECT_EQ(stream.held().size(), 2u);
  // Results alone do not return credit.
  for (const v1::Event& event : stream.TakeHeld()) {
    engine_.OnResults(id, ResultFor(event.id(), v1::Result::OK));
  }
  EXPECT_THAT(stream.held(), IsEmpty());
  engine_.OnCredit(id, 3);
  EXPECT_EQ(stream.held().size(), 3u);
}

TEST_F(EngineTest, CreditInsideResultsCountsLikeACreditMessage) {
  FakeWorkerStream stream("s");
  const int64_t id = Connect(engine_, stream, 2);
  for (int i = 0; i < 10; ++i) engine_.Submit(MakeEvent(0, i, "k" + std::to_string(i)), 10);
  std::vector<v1::Event> sent = stream.TakeHeld();
  ASSERT_EQ(sent.size(), 2u);
  // Results for both with credit 2 folded in: two more go out at once, in
  // one message.
  v1::Results results = ResultFor(sent[0].id(), v1::Result::OK);
  *results.add_results() = ResultFor(sent[1].id(), v1::Result::OK).results(0);
  results.set_credit(2);
  const size_t messages = stream.batches().size();
  engine_.OnResults(id, results);
  EXPECT_THAT(Offsets(stream.TakeHeld()), ElementsAre(2, 3));
  EXPECT_EQ(stream.batches().size(), messages + 1);
  EXPECT_EQ(CommitOffset(engine_, 0), 2);
  // Credit alone in an empty Results (the worker's events were cancelled).
  v1::Results credit_only;
  credit_only.set_credit(3);
  engine_.OnResults(id, credit_only);
  EXPECT_THAT(Offsets(stream.TakeHeld()), ElementsAre(4, 5, 6));
  EXPECT_EQ(engine_.Snapshot().counters.stale_results, 0);
}

TEST_F(EngineTest, FerrysOwnCapHoldsWhateverTheWorkerGrants) {
  Config config = EngineTestConfig();
  config.processors[0].max_in_flight = 3;
  Engine engine(config, &clock_);
  engine.OnAssigned({{"t", 0}});
  FakeWorkerStream stream("s");
  const int64_t id = engine.AddStream(0, &stream);
  engine.OnReady(id, 100);
  for (int i = 0; i < 10; ++i) engine.Submit(MakeEvent(0, i, "k" + std::to_string(i)), 1);
  std::vector<v1::Event> sent = stream.TakeHeld();
  ASSERT_EQ(sent.size(), 3u);
  engine.OnCredit(id, 100);
  EXPECT_THAT(stream.held(), IsEmpty());
  engine.OnResults(id, ResultFor(sent[0].id(), v1::Result::OK));
  EXPECT_EQ(stream.held().size(), 1u);  // one finished, one more may go
}

TEST_F(EngineTest, ManyEventsPerMessageUpToMaxBatch) {
  FakeWorkerStream stream("s");
  for (int i = 0; i < 100; ++i) engine_.Submit(MakeEvent(0, i, "k" + std::to_string(i)), 10);
  Connect(engine_, stream, 1000);
  // 16 lanes: one head each is ready at once, in one message.
  ASSERT_EQ(stream.batches().size(), 1u);
  EXPECT_EQ(stream.batches()[0].events_size(), 16);
}

TEST_F(EngineTest, BatchesStayUnderMaxBatchBytes) {
  Config config = EngineTestConfig();
  config.processors[0].max_batch_bytes = 10 * 1024;
  config.topics[0].ordering = Ordering::kUnordered;  // every event ready at once
  Engine engine(config, &clock_);
  engine.OnAssigned({{"t", 0}});
  for (int i = 0; i < 16; ++i) {
    v1::Event event = MakeEvent(0, i, "k" + std::to_string(i));
    event.set_payload(std::string(3000, 'x'));
    engine.Submit(event, 3000);
  }
  FakeWorkerStream stream("s");
  engine.OnReady(engine.AddStream(0, &stream), 1000);
  int events = 0;
  for (const v1::Events& batch : stream.batches()) {
    EXPECT_LE(batch.ByteSizeLong(), 10u * 1024 + 64);
    EXPECT_GE(batch.events_size(), 1);
    events += batch.events_size();
  }
  EXPECT_EQ(events, 16);
  EXPECT_GE(stream.batches().size(), 5u);
}

TEST_F(EngineTest, CommitsOnlyTheContiguousFinishedPrefix) {
  FakeWorkerStream stream("s");
  const int64_t id = Connect(engine_, stream, 100);
  for (int i = 0; i < 4; ++i) engine_.Submit(MakeEvent(0, i, "k" + std::to_string(i)), 10);
  std::vector<v1::Event> sent = stream.TakeHeld();
  ASSERT_EQ(sent.size(), 4u);
  engine_.OnResults(id, ResultFor(sent[1].id(), v1::Result::OK));
  engine_.OnResults(id, ResultFor(sent[2].id(), v1::Result::OK));
  EXPECT_EQ(CommitOffset(engine_, 0), std::nullopt);
  engine_.OnResults(id, ResultFor(sent[0].id(), v1::Result::OK));
  EXPECT_EQ(CommitOffset(engine_, 0), 3);
  engine_.MarkCommitted(engine_.PendingCommits());
  EXPECT_THAT(engine_.PendingCommits(), IsEmpty());  // only when it advances
  engine_.OnResults(id, ResultFor(sent[3].id(), v1::Result::OK));
  EXPECT_EQ(CommitOffset(engine_, 0), 4);
}

TEST_F(EngineTest, DuplicateAndUnknownResultsApplyOnce) {
  FakeWorkerStream stream("s");
  const int64_t id = Connect(engine_, stream, 100);
  engine_.Submit(MakeEvent(0, 0, "a"), 10);
  engine_.Submit(MakeEvent(0, 1, "a"), 10);
  const uint64_t first = stream.TakeHeld()[0].id();
  engine_.OnResults(id, ResultFor(first, v1::Result::OK));
  engine_.OnResults(id, ResultFor(first, v1::Result::OK));
  engine_.OnResults(id, ResultFor(999999, v1::Result::OK));
  EXPECT_EQ(engine_.Snapshot().counters.acked, 1);
  EXPECT_EQ(engine_.Snapshot().counters.stale_results, 2);
  EXPECT_EQ(CommitOffset(engine_, 0), 1);
}

TEST_F(EngineTest, RetryStaysAtTheHeadOfItsLane) {
  FakeWorkerStream stream("s");
  const int64_t id = Connect(engine_, stream, 100);
  engine_.Submit(MakeEvent(0, 0, "a"), 10);
  engine_.Submit(MakeEvent(0, 1, "a"), 10);
  v1::Event sent = stream.TakeHeld()[0];
  EXPECT_EQ(sent.attempt(), 1);
  engine_.OnResults(id, ResultFor(sent.id(), v1::Result::RETRY));
  // Backing off: neither the retry nor the next event of its key goes yet.
  engine_.OnTimer();
  EXPECT_THAT(stream.held(), IsEmpty());
  clock_.Advance(absl::Milliseconds(100));
  engine_.OnTimer();
  std::vector<v1::Event> again = stream.TakeHeld();
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].offset(), 0);
  EXPECT_EQ(again[0].attempt(), 2);
  EXPECT_NE(again[0].id(), sent.id());
}

TEST_F(EngineTest, RetriesExhaustedIsATerminalFailure) {
  FakeWorkerStream stream("s");
  const int64_t id = Connect(engine_, stream, 100);
  engine_.Submit(MakeEvent(0, 0, "a"), 10);
  for (int attempt = 1; attempt <= 3; ++attempt) {
    clock_.Advance(absl::Seconds(2));
    engine_.OnTimer();
    std::vector<v1::Event> sent = stream.TakeHeld();
    ASSERT_EQ(sent.size(), 1u) << "attempt " << attempt;
    EXPECT_EQ(sent[0].attempt(), attempt);
    engine_.OnResults(id, ResultFor(sent[0].id(), v1::Result::RETRY));
  }
  EXPECT_THAT(stream.held(), IsEmpty());
  EXPECT_EQ(engine_.Snapshot().counters.failed, 1);
  EXPECT_EQ(CommitOffset(engine_, 0), 1);
}

TEST_F(EngineTest, FailIsTerminalAndFinishesTheOffset) {
  FakeWorkerStream stream("s");
  const int64_t id = Connect(engine_, stream, 100);
  engine_.Submit(MakeEvent(0, 0, "a"), 10);
  engine_.OnResults(id, ResultFor(stream.TakeHeld()[0].id(), v1::Result::FAIL, "bad"));
  EXPECT_EQ(engine_.Snapshot().counters.failed, 1);
  EXPECT_EQ(CommitOffset(engine_, 0), 1);
  EXPECT_EQ(engine_.Buffered(), 0);
}

TEST_F(EngineTest, LostStreamRedeliversToAnotherStreamInOrder) {
  FakeWorkerStream first("first");
  FakeWorkerStream second("second");
  const int64_t first_id = Connect(engine_, first, 100);
  engine_.Submit(MakeEvent(0, 0, "a"), 10);
  engine_.Submit(MakeEvent(0, 1, "a"), 10);
  const uint64_t lost = first.TakeHeld()[0].id();
  engine_.OnStreamClosed(first_id);
  const int64_t second_id = Connect(engine_, second, 100);
  std::vector<v1::Event> redelivered = second.TakeHeld();
  ASSERT_THAT(Offsets(redelivered), ElementsAre(0));
  EXPECT_EQ(redelivered[0].attempt(), 1);  // a redelivery is not an attempt
  EXPECT_EQ(engine_.Snapshot().counters.redelivered, 1);
  // A late result from the lost stream is stale.
  engine_.OnResults(first_id, ResultFor(lost, v1::Result::OK));
  EXPECT_EQ(engine_.Snapshot().counters.stale_results, 1);
  engine_.OnResults(second_id, ResultFor(redelivered[0].id(), v1::Result::OK));
  EXPECT_THAT(Offsets(second.TakeHeld()), ElementsAre(1));
}

TEST_F(EngineTest, RevokeDropsWorkAndFencesLateResults) {
  FakeWorkerStream stream("s");
  const int64_t id = Connect(engine_, stream, 100);
  engine_.Submit(MakeEvent(0, 0, "a"), 10);
  engine_.Submit(MakeEvent(0, 1, "b"), 10);
  engine_.Submit(MakeEvent(0, 2, "a"), 10);  // queued behind offset 0
  engine_.Submit(MakeEvent(1, 0, "c"), 10);
  std::vector<v1::Event> sent = stream.TakeHeld();
  ASSERT_EQ(sent.size(), 3u);
  engine_.OnResults(id, ResultFor(sent[0].id(), v1::Result::OK));  // t/0@0
  stream.TakeHeld();                                                  // t/0@2 now in flight
  const std::vector<CommitPosition> positions = engine_.OnRevoked({{"t", 0}});
  ASSERT_EQ(positions.size(), 1u);
  EXPECT_EQ(positions[0].offset, 1);
  EXPECT_EQ(engine_.Buffered(), 1);  // only t/1@0 is left
  engine_.OnResults(id, ResultFor(sent[1].id(), v1::Result::OK));
  EXPECT_EQ(engine_.Snapshot().counters.stale_results, 1);
  // A record of the revoked partition arriving late is not taken.
  engine_.Submit(MakeEvent(0, 3, "z"), 10);
  EXPECT_EQ(engine_.Buffered(), 1);
}

TEST_F(EngineTest, DeadlinePassedCancelsAndFinishes) {
  FakeWorkerStream stream("s");
  const int64_t id = Connect(engine_, stream, 100);
  engine_.Submit(MakeEvent(0, 0, "a"), 10);
  const uint64_t event_id = stream.TakeHeld()[0].id();
  engine_.OnTimer();
  EXPECT_THAT(stream.cancelled(), IsEmpty());
  clock_.Advance(absl::Seconds(11));
  engine_.OnTimer();
  EXPECT_THAT(stream.cancelled(), ElementsAre(event_id));
  EXPECT_EQ(engine_.Snapshot().counters.timed_out, 1);
  EXPECT_EQ(CommitOffset(engine_, 0), 1);
  engine_.OnResults(id, ResultFor(event_id, v1::Result::OK));  // late
  EXPECT_EQ(engine_.Snapshot().counters.stale_results, 1);
}

TEST_F(EngineTest, BudgetsDrivePauseAndResume) {
  FakeWorkerStream stream("s");
  const int64_t id = Connect(engine_, stream, 10000);
  EXPECT_FALSE(engine_.OverHighWatermark());
  for (int i = 0; i < 1000; ++i) engine_.Submit(MakeEvent(0, i, "k" + std::to_string(i % 500)), 1);
  EXPECT_TRUE(engine_.OverHighWatermark());
  EXPECT_FALSE(engine_.UnderLowWatermark());
  // Finish events until under half the budget.
  while (engine_.Buffered() > 400) {
    for (const v1::Event& event : stream.TakeHeld()) {
      engine_.OnResults(id, ResultFor(event.id(), v1::Result::OK));
    }
  }
  EXPECT_FALSE(engine_.OverHighWatermark());
  EXPECT_TRUE(engine_.UnderLowWatermark());
}

TEST_F(EngineTest, SubmitBatchDispatchesOnceInOneMessage) {
  FakeWorkerStream stream("s");
  Connect(engine_, stream, 1000);
  std::vector<Engine::SubmitItem> items;
  for (int i = 0; i < 40; ++i) {
    items.push_back({MakeEvent(i % 2, i / 2, "k" + std::to_string(i)), 1, std::nullopt});
  }
  engine_.SubmitBatch(items);
  // One dispatch for the whole batch: one Events message, not one per record.
  // (40 keys share 16 lanes here, so one event per lane leaves.)
  ASSERT_EQ(stream.batches().size(), 1u);
  EXPECT_EQ(stream.batches()[0].events_size(), 16);
  EXPECT_EQ(engine_.Snapshot().in_flight, 16);
  EXPECT_EQ(engine_.Buffered(), 40);
  // Per-key order and duplicates are handled exactly like Submit().
  std::vector<Engine::SubmitItem> more;
  more.push_back({MakeEvent(0, 19, "k38"), 1, std::nullopt});  // already read: a duplicate
  more.push_back({MakeEvent(0, 20, "k0"), 1, std::nullopt});   // behind offset 0 of key k0
  engine_.SubmitBatch(more);
  EXPECT_EQ(engine_.Snapshot().counters.duplicate_records, 1);
  EXPECT_EQ(stream.held().size(), 16u);
  EXPECT_EQ(engine_.Buffered(), 41);
}

TEST_F(EngineTest, RoomIsTheBudgetLeft) {
  EXPECT_EQ(engine_.Room().events, 1000);
  for (int i = 0; i < 10; ++i) engine_.Submit(MakeEvent(0, i, "k"), 5);
  EXPECT_EQ(engine_.Room().events, 990);
  EXPECT_EQ(engine_.Room().bytes, (256LL << 20) - 50);
}

// A stream that asks the engine for its state while it is being sent to: it
// would deadlock (or trip absl's deadlock detector) if the engine still held
// its mutex during SendEvents/SendCancel.
class ReentrantStream final : public WorkerStream {
 public:
  explicit ReentrantStream(Engine* engine) : engine_(engine) {}
  void SendEvents(EventsWire wire) override {
    buffered_seen_.push_back(engine_->Buffered());
    v1::Events events;
    ASSERT_TRUE(events.ParseFromString(wire.bytes));
    for (const v1::Event& event : events.events()) sent_.push_back(event);
  }
  void SendCancel(std::vector<uint64_t> ids) override {
    buffered_seen_.push_back(engine_->Buffered());
    cancelled_.insert(cancelled_.end(), ids.begin(), ids.end());
  }
  std::string Describe() const override { return "reentrant"; }
  Engine* const engine_;
  std::vector<int64_t> buffered_seen_;
  std::vector<v1::Event> sent_;
  std::vector<uint64_t> cancelled_;
};

TEST_F(EngineTest, StreamsAreSentToWithoutTheEngineLock) {
  ReentrantStream stream(&engine_);
  const int64_t id = engine_.AddStream(0, &stream);
  engine_.OnReady(id, 10);
  engine_.Submit(MakeEvent(0, 0, "a"), 1);
  ASSERT_EQ(stream.sent_.size(), 1u);
  clock_.Advance(absl::Seconds(11));
  engine_.OnTimer();  // the deadline passed: a Cancel
  EXPECT_THAT(stream.cancelled_, ElementsAre(stream.sent_[0].id()));
  EXPECT_THAT(stream.buffered_seen_, ElementsAre(1, 0));
}

TEST_F(EngineTest, NothingIsDispatchedAfterStopDispatching) {
  FakeWorkerStream stream("s");
  const int64_t id = Connect(engine_, stream, 10);
  engine_.Submit(MakeEvent(0, 0, "a"), 1);
  engine_.Submit(MakeEvent(0, 1, "a"), 1);
  const uint64_t first = stream.TakeHeld()[0].id();
  engine_.StopDispatching();
  engine_.OnResults(id, ResultFor(first, v1::Result::OK));
  EXPECT_THAT(stream.held(), IsEmpty());
  EXPECT_EQ(CommitOffset(engine_, 0), 1);  // results still count
}

TEST_F(EngineTest, DuplicateRecordInOneAssignmentIsIgnored) {
  FakeWorkerStream stream("s");
  Connect(engine_, stream, 100);
  engine_.Submit(MakeEvent(0, 5, "a"), 10);
  engine_.Submit(MakeEvent(0, 5, "a"), 10);
  EXPECT_EQ(engine_.Buffered(), 1);
  EXPECT_EQ(engine_.Snapshot().counters.duplicate_records, 1);
}

TEST_F(EngineTest, BackoffGrowsAndHonoursRetryAfter) {
  FakeWorkerStream stream("s");
  const int64_t id = Connect(engine_, stream, 100);
  engine_.Submit(MakeEvent(0, 0, "a"), 10);
  v1::Results retry = ResultFor(stream.TakeHeld()[0].id(), v1::Result::RETRY);
  retry.mutable_results(0)->set_retry_after_ms(700);
  engine_.OnResults(id, retry);
  clock_.Advance(absl::Milliseconds(690));
  engine_.OnTimer();
  EXPECT_THAT(stream.held(), IsEmpty());  // the worker asked for 700ms
  clock_.Advance(absl::Milliseconds(10));
  engine_.OnTimer();
  ASSERT_EQ(stream.held().size(), 1u);
  // Second retry: backoff 100ms * 2 = 200ms, jittered into [100ms, 200ms].
  engine_.OnResults(id, ResultFor(stream.TakeHeld()[0].id(), v1::Result::RETRY));
  clock_.Advance(absl::Milliseconds(99));
  engine_.OnTimer();
  EXPECT_THAT(stream.held(), IsEmpty());
  clock_.Advance(absl::Milliseconds(101));
  engine_.OnTimer();
  EXPECT_EQ(stream.held().size(), 1u);
}

TEST_F(EngineTest, RetryAfterIsCappedAtTheMaximumBackoff) {
  // A hostile or buggy worker asks for 4e9 ms (49 days): the key's lane must
  // not be parked past retry_backoff_max.
  FakeWorkerStream stream("s");
  const int64_t id = Connect(engine_, stream, 100);
  engine_.Submit(MakeEvent(0, 0, "a"), 10);
  v1::Results retry = ResultFor(stream.TakeHeld()[0].id(), v1::Result::RETRY);
  retry.mutable_results(0)->set_retry_after_ms(4000000000u);
  engine_.OnResults(id, retry);
  const absl::Duration max = EngineTestConfig().processors[0].retry_backoff_max;
  clock_.Advance(max - absl::Milliseconds(1));
  engine_.OnTimer();
  EXPECT_THAT(stream.held(), IsEmpty());
  clock_.Advance(absl::Milliseconds(1));
  engine_.OnTimer();
  ASSERT_EQ(stream.held().size(), 1u);
  EXPECT_EQ(stream.held()[0].attempt(), 2);
}

TEST_F(EngineTest, DeliveryIdsCarryTheEpochAndStayUnique) {
  FakeWorkerStream stream("s");
  Connect(engine_, stream, 100);
  engine_.Submit(MakeEvent(0, 0, "a"), 1);
  engine_.Submit(MakeEvent(1, 0, "b"), 1);
  std::vector<v1::Event> sent = stream.TakeHeld();
  ASSERT_EQ(sent.size(), 2u);
  EXPECT_NE(sent[0].id(), sent[1].id());
  // Partitions 0 and 1 were assigned with epochs 1 and 2.
  EXPECT_EQ(sent[0].id() >> 40, 1u);
  EXPECT_EQ(sent[1].id() >> 40, 2u);
}

// Protocol errors (results or credit before Ready, unknown statuses, bytes
// that do not parse) are tested in engine_stream_test.cc.

TEST_F(EngineTest, UnspecifiedStatusCountsAsFail) {
  FakeWorkerStream stream("s");
  const int64_t id = Connect(engine_, stream, 10);
  engine_.Submit(MakeEvent(0, 0, "a"), 1);
  engine_.OnResults(id, ResultFor(stream.TakeHeld()[0].id(), v1::Result::STATUS_UNSPECIFIED));
  EXPECT_EQ(engine_.Snapshot().counters.failed, 1);
  EXPECT_EQ(CommitOffset(engine_, 0), 1);
}

TEST_F(EngineTest, RetryOnTimeoutRetriesInsteadOfFailing) {
  Config config = EngineTestConfig();
  config.processors[0].retry_on_timeout = true;
  Engine engine(config, &clock_);
  engine.OnAssigned({{"t", 0}});
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

class FailurePolicyTest : public ::testing::Test {
 protected:
  static Config WithPolicy(FailurePolicy policy) {
    Config config = EngineTestConfig();
    config.on_failure = policy;
    config.dead_letter_topic = "dlq";
    return config;
  }
  void Start(FailurePolicy policy) {
    engine_ = std::make_unique<Engine>(WithPolicy(policy), &clock_, &writer_);
    engine_->OnAssigned({{"t", 0}});
    stream_id_ = engine_->AddStream(0, &stream_);
    engine_->OnReady(stream_id_, 100);
  }
  void FailHead(const std::string& message) {
    std::vector<v1::Event> sent = stream_.TakeHeld();
    ASSERT_FALSE(sent.empty());
    engine_->OnResults(stream_id_, ResultFor(sent[0].id(), v1::Result::FAIL, message));
  }
  FakeClock clock_;
  FakeDeadLetterWriter writer_;
  FakeWorkerStream stream_{"s"};
  std::unique_ptr<Engine> engine_;
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

class RoutingTest : public EngineTest {
 protected:
  static Config TwoProcessors() {
    Config config = EngineTestConfig();
    config.processors[0].event_types = {"order"};
    ProcessorConfig other = config.processors[0];
    other.name = "q";
    other.event_types = {"refund"};
    config.processors.push_back(other);
    return config;
  }
  RoutingTest() : EngineTest(TwoProcessors()) {}
};

TEST_F(RoutingTest, EventsGoToTheProcessorOfTheirTypeAndUnknownTypesFail) {
  FakeWorkerStream orders("orders");
  FakeWorkerStream refunds("refunds");
  engine_.OnReady(engine_.AddStream(0, &orders), 10);
  engine_.OnReady(engine_.AddStream(1, &refunds), 10);
  engine_.Submit(MakeEvent(0, 0, "a", "order"), 10);
  engine_.Submit(MakeEvent(0, 1, "b", "refund"), 10);
  engine_.Submit(MakeEvent(0, 2, "c", "unknown"), 10);
  EXPECT_THAT(Offsets(orders.held()), ElementsAre(0));
  EXPECT_THAT(Offsets(refunds.held()), ElementsAre(1));
  EXPECT_EQ(engine_.Snapshot().counters.failed, 1);
}

}  // namespace
}  // namespace ferry
