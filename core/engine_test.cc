#include "core/engine.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/mocks/fake_clock.h"
#include "tests/mocks/fake_worker_stream.h"

namespace ferry {
namespace {

using ::ferry::testing::FakeClock;
using ::ferry::testing::FakeWorkerStream;
using ::testing::ElementsAre;
using ::testing::IsEmpty;

Config TestConfig() {
  Config config;
  config.topics.push_back(TopicConfig{"t", Ordering::kKey, {}, {}});
  ProcessorConfig processor;
  processor.name = "p";
  processor.target = "ipv4:127.0.0.1:1";
  processor.max_in_flight = 1000;
  processor.max_batch = 64;
  processor.timeout = absl::Seconds(10);
  config.processors.push_back(processor);
  config.lane_count = 16;
  config.lane_capacity = 100;
  config.max_buffered_events = 1000;
  return config;
}

v1::Event MakeEvent(int32_t partition, int64_t offset, const std::string& key,
                    const std::string& type = "t") {
  v1::Event event;
  event.set_topic("t");
  event.set_partition(partition);
  event.set_offset(offset);
  event.set_key(key);
  event.set_type(type);
  return event;
}

v1::Results ResultFor(uint64_t id, v1::Result::Status status, const std::string& message = "") {
  v1::Results results;
  v1::Result* result = results.add_results();
  result->set_id(id);
  result->set_status(status);
  result->set_message(message);
  return results;
}

std::vector<int64_t> Offsets(const std::vector<v1::Event>& events) {
  std::vector<int64_t> offsets;
  for (const v1::Event& event : events) offsets.push_back(event.offset());
  return offsets;
}

class EngineTest : public ::testing::Test {
 protected:
  explicit EngineTest(Config config = TestConfig()) : engine_(config, &clock_) {
    engine_.OnAssigned({{"t", 0}, {"t", 1}});
  }
  int64_t Connect(FakeWorkerStream& stream, uint32_t credit) {
    const int64_t id = engine_.AddStream(0, &stream);
    engine_.OnReady(id, credit);
    return id;
  }
  std::optional<int64_t> CommitOffset(int32_t partition) {
    for (const CommitPosition& position : engine_.PendingCommits()) {
      if (position.partition.partition == partition) return position.offset;
    }
    return std::nullopt;
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
  const int64_t id = Connect(stream, 100);
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
  const int64_t id = Connect(stream, 2);
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

TEST_F(EngineTest, FerrysOwnCapHoldsWhateverTheWorkerGrants) {
  Config config = TestConfig();
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
  Connect(stream, 1000);
  // 16 lanes: one head each is ready at once, in one message.
  ASSERT_EQ(stream.batches().size(), 1u);
  EXPECT_EQ(stream.batches()[0].events_size(), 16);
}

TEST_F(EngineTest, BatchesStayUnderMaxBatchBytes) {
  Config config = TestConfig();
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
  const int64_t id = Connect(stream, 100);
  for (int i = 0; i < 4; ++i) engine_.Submit(MakeEvent(0, i, "k" + std::to_string(i)), 10);
  std::vector<v1::Event> sent = stream.TakeHeld();
  ASSERT_EQ(sent.size(), 4u);
  engine_.OnResults(id, ResultFor(sent[1].id(), v1::Result::OK));
  engine_.OnResults(id, ResultFor(sent[2].id(), v1::Result::OK));
  EXPECT_EQ(CommitOffset(0), std::nullopt);
  engine_.OnResults(id, ResultFor(sent[0].id(), v1::Result::OK));
  EXPECT_EQ(CommitOffset(0), 3);
  engine_.MarkCommitted(engine_.PendingCommits());
  EXPECT_THAT(engine_.PendingCommits(), IsEmpty());  // only when it advances
  engine_.OnResults(id, ResultFor(sent[3].id(), v1::Result::OK));
  EXPECT_EQ(CommitOffset(0), 4);
}

TEST_F(EngineTest, DuplicateAndUnknownResultsApplyOnce) {
  FakeWorkerStream stream("s");
  const int64_t id = Connect(stream, 100);
  engine_.Submit(MakeEvent(0, 0, "a"), 10);
  engine_.Submit(MakeEvent(0, 1, "a"), 10);
  const uint64_t first = stream.TakeHeld()[0].id();
  engine_.OnResults(id, ResultFor(first, v1::Result::OK));
  engine_.OnResults(id, ResultFor(first, v1::Result::OK));
  engine_.OnResults(id, ResultFor(999999, v1::Result::OK));
  EXPECT_EQ(engine_.Snapshot().counters.acked, 1);
  EXPECT_EQ(engine_.Snapshot().counters.stale_results, 2);
  EXPECT_EQ(CommitOffset(0), 1);
}

TEST_F(EngineTest, RetryStaysAtTheHeadOfItsLane) {
  FakeWorkerStream stream("s");
  const int64_t id = Connect(stream, 100);
  engine_.Submit(MakeEvent(0, 0, "a"), 10);
  engine_.Submit(MakeEvent(0, 1, "a"), 10);
  v1::Event sent = stream.TakeHeld()[0];
  EXPECT_EQ(sent.attempt(), 1);
  engine_.OnResults(id, ResultFor(sent.id(), v1::Result::RETRY));
  std::vector<v1::Event> again = stream.TakeHeld();
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].offset(), 0);
  EXPECT_EQ(again[0].attempt(), 2);
  EXPECT_NE(again[0].id(), sent.id());
}

TEST_F(EngineTest, RetriesExhaustedIsATerminalFailure) {
  FakeWorkerStream stream("s");
  const int64_t id = Connect(stream, 100);
  engine_.Submit(MakeEvent(0, 0, "a"), 10);
  for (int attempt = 1; attempt <= Engine::kMaxAttempts; ++attempt) {
    std::vector<v1::Event> sent = stream.TakeHeld();
    ASSERT_EQ(sent.size(), 1u) << "attempt " << attempt;
    engine_.OnResults(id, ResultFor(sent[0].id(), v1::Result::RETRY));
  }
  EXPECT_THAT(stream.held(), IsEmpty());
  EXPECT_EQ(engine_.Snapshot().counters.failed, 1);
  EXPECT_EQ(CommitOffset(0), 1);
}

TEST_F(EngineTest, FailIsTerminalAndFinishesTheOffset) {
  FakeWorkerStream stream("s");
  const int64_t id = Connect(stream, 100);
  engine_.Submit(MakeEvent(0, 0, "a"), 10);
  engine_.OnResults(id, ResultFor(stream.TakeHeld()[0].id(), v1::Result::FAIL, "bad"));
  EXPECT_EQ(engine_.Snapshot().counters.failed, 1);
  EXPECT_EQ(CommitOffset(0), 1);
  EXPECT_EQ(engine_.Buffered(), 0);
}

TEST_F(EngineTest, LostStreamRedeliversToAnotherStreamInOrder) {
  FakeWorkerStream first("first");
  FakeWorkerStream second("second");
  const int64_t first_id = Connect(first, 100);
  engine_.Submit(MakeEvent(0, 0, "a"), 10);
  engine_.Submit(MakeEvent(0, 1, "a"), 10);
  const uint64_t lost = first.TakeHeld()[0].id();
  engine_.OnStreamClosed(first_id);
  const int64_t second_id = Connect(second, 100);
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
  const int64_t id = Connect(stream, 100);
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
  const int64_t id = Connect(stream, 100);
  engine_.Submit(MakeEvent(0, 0, "a"), 10);
  const uint64_t event_id = stream.TakeHeld()[0].id();
  engine_.ExpireDeadlines();
  EXPECT_THAT(stream.cancelled(), IsEmpty());
  clock_.Advance(absl::Seconds(11));
  engine_.ExpireDeadlines();
  EXPECT_THAT(stream.cancelled(), ElementsAre(event_id));
  EXPECT_EQ(engine_.Snapshot().counters.timed_out, 1);
  EXPECT_EQ(CommitOffset(0), 1);
  engine_.OnResults(id, ResultFor(event_id, v1::Result::OK));  // late
  EXPECT_EQ(engine_.Snapshot().counters.stale_results, 1);
}

TEST_F(EngineTest, BudgetsDrivePauseAndResume) {
  FakeWorkerStream stream("s");
  const int64_t id = Connect(stream, 10000);
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

TEST_F(EngineTest, DuplicateRecordInOneAssignmentIsIgnored) {
  FakeWorkerStream stream("s");
  Connect(stream, 100);
  engine_.Submit(MakeEvent(0, 5, "a"), 10);
  engine_.Submit(MakeEvent(0, 5, "a"), 10);
  EXPECT_EQ(engine_.Buffered(), 1);
  EXPECT_EQ(engine_.Snapshot().counters.duplicate_records, 1);
}

class RoutingTest : public EngineTest {
 protected:
  static Config TwoProcessors() {
    Config config = TestConfig();
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
