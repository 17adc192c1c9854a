// The Engine's core path with a fake clock and fake worker streams: credit,
// per-key order, batching, commit positions, budgets, revoke, routing.
// Failures, retries and the failure policy: engine_failure_test.cc.
#include "core/engine/engine.h"

#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/mocks/engine_fixtures.h"

namespace ferry::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

class EngineTest : public ::testing::Test, public EngineHarness {
 protected:
  explicit EngineTest(const Config& config = EngineTestConfig())
      : EngineHarness(config, TwoPartitions(), DeadLetters::kNone) {}
  // Offsets 0..count-1 of t/0, 10 bytes each, each of its own key "k<offset>".
  void SubmitOwnKeys(int count) {
    for (int i = 0; i < count; ++i) engine_->Submit(MakeEvent(0, i, "k" + std::to_string(i)), 10);
  }
};

TEST_F(EngineTest, NothingIsSentBeforeReady) {
  FakeWorkerStream stream("s");
  const int64_t id = engine_->AddStream(0, &stream);
  engine_->Submit(MakeEvent(0, 0, "a"), 10);
  EXPECT_THAT(stream.held(), IsEmpty());
  engine_->OnReady(id, 10);
  EXPECT_THAT(Offsets(stream.held()), ElementsAre(0));
}

TEST_F(EngineTest, OneKeyHasOneEventInFlightAndKeepsOrder) {
  FakeWorkerStream stream("s");
  const int64_t id = Connect(*engine_, stream, 100);
  engine_->Submit(MakeEvent(0, 0, "a"), 10);
  engine_->Submit(MakeEvent(0, 1, "a"), 10);
  engine_->Submit(MakeEvent(0, 2, "b"), 10);
  engine_->Submit(MakeEvent(0, 3, "a"), 10);
  std::vector<v1::Event> sent = stream.TakeHeld();
  ASSERT_THAT(Offsets(sent), ElementsAre(0, 2));
  engine_->OnResults(id, ResultFor(sent[0].id(), v1::Result::OK));
  sent = stream.TakeHeld();
  ASSERT_THAT(Offsets(sent), ElementsAre(1));
  engine_->OnResults(id, ResultFor(sent[0].id(), v1::Result::OK));
  EXPECT_THAT(Offsets(stream.TakeHeld()), ElementsAre(3));
}

TEST_F(EngineTest, CreditIsNeverExceeded) {
  FakeWorkerStream stream("s");
  const int64_t id = Connect(*engine_, stream, 2);
  SubmitOwnKeys(10);
  EXPECT_EQ(stream.held().size(), 2u);
  // Results alone do not return credit.
  AckAll(*engine_, id, stream);
  EXPECT_THAT(stream.held(), IsEmpty());
  engine_->OnCredit(id, 3);
  EXPECT_EQ(stream.held().size(), 3u);
}

TEST_F(EngineTest, CreditInsideResultsCountsLikeACreditMessage) {
  FakeWorkerStream stream("s");
  const int64_t id = Connect(*engine_, stream, 2);
  SubmitOwnKeys(10);
  std::vector<v1::Event> sent = stream.TakeHeld();
  ASSERT_EQ(sent.size(), 2u);
  // Results for both with credit 2 folded in: two more go out at once, in
  // one message.
  v1::Results results = ResultFor(sent[0].id(), v1::Result::OK);
  *results.add_results() = ResultFor(sent[1].id(), v1::Result::OK).results(0);
  results.set_credit(2);
  const size_t messages = stream.batches().size();
  engine_->OnResults(id, results);
  EXPECT_THAT(Offsets(stream.TakeHeld()), ElementsAre(2, 3));
  EXPECT_EQ(stream.batches().size(), messages + 1);
  EXPECT_EQ(CommitOffset(*engine_, 0), 2);
  // Credit alone in an empty Results (the worker's events were cancelled).
  v1::Results credit_only;
  credit_only.set_credit(3);
  engine_->OnResults(id, credit_only);
  EXPECT_THAT(Offsets(stream.TakeHeld()), ElementsAre(4, 5, 6));
  EXPECT_EQ(engine_->Snapshot().counters.stale_results, 0);
}

TEST_F(EngineTest, FerrysOwnCapHoldsWhateverTheWorkerGrants) {
  Config config = EngineTestConfig();
  config.processors[0].max_in_flight = 3;
  Engine& engine = Start(config, {{"t", 0}}, DeadLetters::kNone);
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
  SubmitOwnKeys(100);
  Connect(*engine_, stream, 1000);
  // 16 lanes: one head each is ready at once, in one message.
  ASSERT_EQ(stream.batches().size(), 1u);
  EXPECT_EQ(stream.batches()[0].events_size(), 16);
}

TEST_F(EngineTest, BatchesStayUnderMaxBatchBytes) {
  Config config = EngineTestConfig();
  config.processors[0].max_batch_bytes = 10 * 1024;
  config.topics[0].ordering = Ordering::kUnordered;  // every event ready at once
  Engine& engine = Start(config, {{"t", 0}}, DeadLetters::kNone);
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
  const int64_t id = Connect(*engine_, stream, 100);
  SubmitOwnKeys(4);
  std::vector<v1::Event> sent = stream.TakeHeld();
  ASSERT_EQ(sent.size(), 4u);
  engine_->OnResults(id, ResultFor(sent[1].id(), v1::Result::OK));
  engine_->OnResults(id, ResultFor(sent[2].id(), v1::Result::OK));
  EXPECT_EQ(CommitOffset(*engine_, 0), std::nullopt);
  engine_->OnResults(id, ResultFor(sent[0].id(), v1::Result::OK));
  EXPECT_EQ(CommitOffset(*engine_, 0), 3);
  engine_->MarkCommitted(engine_->PendingCommits());
  EXPECT_THAT(engine_->PendingCommits(), IsEmpty());  // only when it advances
  engine_->OnResults(id, ResultFor(sent[3].id(), v1::Result::OK));
  EXPECT_EQ(CommitOffset(*engine_, 0), 4);
}

TEST_F(EngineTest, DuplicateAndUnknownResultsApplyOnce) {
  FakeWorkerStream stream("s");
  const int64_t id = Connect(*engine_, stream, 100);
  engine_->Submit(MakeEvent(0, 0, "a"), 10);
  engine_->Submit(MakeEvent(0, 1, "a"), 10);
  const uint64_t first = stream.TakeHeld()[0].id();
  engine_->OnResults(id, ResultFor(first, v1::Result::OK));
  engine_->OnResults(id, ResultFor(first, v1::Result::OK));
  engine_->OnResults(id, ResultFor(999999, v1::Result::OK));
  EXPECT_EQ(engine_->Snapshot().counters.acked, 1);
  EXPECT_EQ(engine_->Snapshot().counters.stale_results, 2);
  EXPECT_EQ(CommitOffset(*engine_, 0), 1);
}

TEST_F(EngineTest, LostStreamRedeliversToAnotherStreamInOrder) {
  FakeWorkerStream first("first");
  FakeWorkerStream second("second");
  const int64_t first_id = Connect(*engine_, first, 100);
  engine_->Submit(MakeEvent(0, 0, "a"), 10);
  engine_->Submit(MakeEvent(0, 1, "a"), 10);
  const uint64_t lost = first.TakeHeld()[0].id();
  engine_->OnStreamClosed(first_id);
  const int64_t second_id = Connect(*engine_, second, 100);
  std::vector<v1::Event> redelivered = second.TakeHeld();
  ASSERT_THAT(Offsets(redelivered), ElementsAre(0));
  EXPECT_EQ(redelivered[0].attempt(), 1);  // a redelivery is not an attempt
  EXPECT_EQ(engine_->Snapshot().counters.redelivered, 1);
  // A late result from the lost stream is stale.
  engine_->OnResults(first_id, ResultFor(lost, v1::Result::OK));
  EXPECT_EQ(engine_->Snapshot().counters.stale_results, 1);
  engine_->OnResults(second_id, ResultFor(redelivered[0].id(), v1::Result::OK));
  EXPECT_THAT(Offsets(second.TakeHeld()), ElementsAre(1));
}

TEST_F(EngineTest, RevokeDropsWorkAndFencesLateResults) {
  FakeWorkerStream stream("s");
  const int64_t id = Connect(*engine_, stream, 100);
  engine_->Submit(MakeEvent(0, 0, "a"), 10);
  engine_->Submit(MakeEvent(0, 1, "b"), 10);
  engine_->Submit(MakeEvent(0, 2, "a"), 10);  // queued behind offset 0
  engine_->Submit(MakeEvent(1, 0, "c"), 10);
  std::vector<v1::Event> sent = stream.TakeHeld();
  ASSERT_EQ(sent.size(), 3u);
  engine_->OnResults(id, ResultFor(sent[0].id(), v1::Result::OK));  // t/0@0
  stream.TakeHeld();                                                  // t/0@2 now in flight
  const std::vector<CommitPosition> positions = engine_->OnRevoked({{"t", 0}});
  ASSERT_EQ(positions.size(), 1u);
  EXPECT_EQ(positions[0].offset, 1);
  EXPECT_EQ(engine_->Buffered(), 1);  // only t/1@0 is left
  engine_->OnResults(id, ResultFor(sent[1].id(), v1::Result::OK));
  EXPECT_EQ(engine_->Snapshot().counters.stale_results, 1);
  // A record of the revoked partition arriving late is not taken.
  engine_->Submit(MakeEvent(0, 3, "z"), 10);
  EXPECT_EQ(engine_->Buffered(), 1);
}

TEST_F(EngineTest, BudgetsDrivePauseAndResume) {
  FakeWorkerStream stream("s");
  const int64_t id = Connect(*engine_, stream, 10000);
  EXPECT_FALSE(engine_->OverHighWatermark());
  for (int i = 0; i < 1000; ++i) engine_->Submit(MakeEvent(0, i, "k" + std::to_string(i % 500)), 1);
  EXPECT_TRUE(engine_->OverHighWatermark());
  EXPECT_FALSE(engine_->UnderLowWatermark());
  // Finish events until under half the budget.
  while (engine_->Buffered() > 400) {
    AckAll(*engine_, id, stream);
  }
  EXPECT_FALSE(engine_->OverHighWatermark());
  EXPECT_TRUE(engine_->UnderLowWatermark());
}

TEST_F(EngineTest, AConsumerWaitingForRoomWakesWhenResultsDrainTheBuffers) {
  FakeWorkerStream stream("s");
  const int64_t id = Connect(*engine_, stream, 10000);
  for (int i = 0; i < 1000; ++i) engine_->Submit(MakeEvent(0, i, "k" + std::to_string(i % 500)), 1);
  ASSERT_TRUE(engine_->OverHighWatermark());
  EXPECT_FALSE(engine_->AwaitUnderLowWatermark(absl::Milliseconds(1)));
  // The waiter is woken by the results (the lock's release re-checks the
  // watermark), not by its timeout.
  bool drained = false;
  std::thread waiter([&] { drained = engine_->AwaitUnderLowWatermark(absl::Seconds(60)); });
  while (!engine_->UnderLowWatermark()) AckAll(*engine_, id, stream);
  waiter.join();
  EXPECT_TRUE(drained);
  EXPECT_TRUE(engine_->AwaitUnderLowWatermark(absl::ZeroDuration()));
}

TEST_F(EngineTest, SubmitBatchDispatchesOnceInOneMessage) {
  FakeWorkerStream stream("s");
  Connect(*engine_, stream, 1000);
  std::vector<Engine::SubmitItem> items;
  for (int i = 0; i < 40; ++i) {
    items.push_back(SubmitItemOf(MakeEvent(i % 2, i / 2, "k" + std::to_string(i)), 1));
  }
  engine_->SubmitBatch(items);
  // One dispatch for the whole batch: one Events message, not one per record.
  // (40 keys share 16 lanes here, so one event per lane leaves.)
  ASSERT_EQ(stream.batches().size(), 1u);
  EXPECT_EQ(stream.batches()[0].events_size(), 16);
  EXPECT_EQ(engine_->Snapshot().in_flight, 16);
  EXPECT_EQ(engine_->Buffered(), 40);
  // Per-key order and duplicates are handled exactly like Submit().
  std::vector<Engine::SubmitItem> more;
  more.push_back(SubmitItemOf(MakeEvent(0, 19, "k38"), 1));  // already read: a duplicate
  more.push_back(SubmitItemOf(MakeEvent(0, 20, "k0"), 1));   // behind offset 0 of key k0
  engine_->SubmitBatch(more);
  EXPECT_EQ(engine_->Snapshot().counters.duplicate_records, 1);
  EXPECT_EQ(stream.held().size(), 16u);
  EXPECT_EQ(engine_->Buffered(), 41);
}

// Events acked OK come back through SubmitBatch's spares, cleared, at most
// one per item submitted; a failed one does not (its dead letter or retry
// still needs it). A spare filled again is delivered like a new Event:
// nothing of its last delivery (id, attempt, run) is left on it.
TEST_F(EngineTest, AckedEventsComeBackAsSparesAndTravelAgainLikeNewOnes) {
  FakeWorkerStream stream("s");
  const int64_t id = Connect(*engine_, stream, 1000);
  std::vector<Engine::SubmitItem> items;
  for (int i = 0; i < 3; ++i) {
    items.push_back(SubmitItemOf(MakeEvent(0, i, "k" + std::to_string(i)), 1));
  }
  std::vector<std::unique_ptr<v1::Event>> spares;
  engine_->SubmitBatch(items, &spares);
  EXPECT_THAT(spares, IsEmpty());  // nothing finished yet
  std::vector<v1::Event> sent = stream.TakeHeld();
  ASSERT_EQ(sent.size(), 3u);
  engine_->OnResults(id, ResultFor(sent[0].id(), v1::Result::OK));
  engine_->OnResults(id, ResultFor(sent[1].id(), v1::Result::OK));
  engine_->OnResults(id, ResultFor(sent[2].id(), v1::Result::FAIL, "no"));

  std::vector<Engine::SubmitItem> one;
  one.push_back(SubmitItemOf(MakeEvent(0, 3, "k3"), 1));
  engine_->SubmitBatch(one, &spares);
  ASSERT_EQ(spares.size(), 1u);  // no more than the batch's size
  std::vector<Engine::SubmitItem> two;
  two.push_back(SubmitItemOf(MakeEvent(0, 4, "k4"), 1));
  two.push_back(SubmitItemOf(MakeEvent(0, 5, "k5"), 1));
  engine_->SubmitBatch(two, &spares);
  ASSERT_EQ(spares.size(), 2u);  // the other acked one; the failed one is not here
  for (const auto& spare : spares) EXPECT_EQ(spare->ByteSizeLong(), 0u);

  // Filled again the way the consumer's decoder does (Clear, then fields).
  std::vector<Engine::SubmitItem> reused;
  for (int i = 0; i < 2; ++i) {
    Engine::SubmitItem item;
    item.event = std::move(spares[static_cast<size_t>(i)]);
    *item.event = MakeEvent(1, i, "r" + std::to_string(i));
    item.bytes = 1;
    reused.push_back(std::move(item));
  }
  spares.clear();
  engine_->SubmitBatch(reused, &spares);
  std::vector<v1::Event> again = stream.TakeHeld();
  ASSERT_EQ(again.size(), 5u);  // offsets 3, 4, 5 of partition 0 and the two reused
  for (const v1::Event& event : again) {
    EXPECT_EQ(event.attempt(), 1);
    EXPECT_EQ(event.run_id(), 0u);
    EXPECT_NE(event.id(), sent[0].id());
    EXPECT_NE(event.id(), sent[1].id());
  }
  EXPECT_EQ(again[3].partition(), 1);
  EXPECT_EQ(again[3].key(), "r0");
  EXPECT_EQ(again[4].key(), "r1");
  EXPECT_EQ(engine_->Snapshot().in_flight, 5);
}

// Between the budget's low and high marks the engine finishes up to half its
// budget of events before the consumer reads again, and the records read
// then need as many Events: every one acked comes back as a spare, not only
// a fixed few thousand (event_pool.h).
class EnginePoolTest : public EngineTest {
 protected:
  static constexpr int kBudget = 10000;
  static Config PoolConfig() {
    Config config = EngineTestConfig();
    config.max_buffered_events = kBudget;
    config.lane_capacity = kBudget;
    return config;
  }
  EnginePoolTest() : EngineTest(PoolConfig()) {}

  static std::vector<Engine::SubmitItem> Records(int64_t first, int count) {
    std::vector<Engine::SubmitItem> items;
    for (int64_t offset = first; offset < first + count; ++offset) {
      items.push_back(SubmitItemOf(MakeEvent(0, offset, "k" + std::to_string(offset)), 1));
    }
    return items;
  }
};

TEST_F(EnginePoolTest, EveryEventAckedWhileTheBudgetHasRoomComesBackAsASpare) {
  FakeWorkerStream stream("s");
  // Credit for every event (the results below return none).
  const int64_t id = Connect(*engine_, stream, 2 * kBudget);
  std::vector<Engine::SubmitItem> first = Records(0, kBudget);
  engine_->SubmitBatch(first);
  while (engine_->Buffered() > 0) {
    std::vector<v1::Event> sent = stream.TakeHeld();
    ASSERT_FALSE(sent.empty());
    for (const v1::Event& event : sent) engine_->OnResults(id, ResultFor(event.id(), v1::Result::OK));
  }
  std::vector<std::unique_ptr<v1::Event>> spares;
  std::vector<Engine::SubmitItem> second = Records(kBudget, kBudget);
  engine_->SubmitBatch(second, &spares);
  EXPECT_EQ(spares.size(), static_cast<size_t>(kBudget));
}

TEST_F(EngineTest, RoomIsTheBudgetLeft) {
  EXPECT_EQ(engine_->Room().events, 1000);
  for (int i = 0; i < 10; ++i) engine_->Submit(MakeEvent(0, i, "k"), 5);
  EXPECT_EQ(engine_->Room().events, 990);
  EXPECT_EQ(engine_->Room().bytes, (256LL << 20) - 50);
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
  ReentrantStream stream(engine_.get());
  const int64_t id = engine_->AddStream(0, &stream);
  engine_->OnReady(id, 10);
  engine_->Submit(MakeEvent(0, 0, "a"), 1);
  ASSERT_EQ(stream.sent_.size(), 1u);
  clock_.Advance(absl::Seconds(11));
  engine_->OnTimer();  // the deadline passed: a Cancel
  EXPECT_THAT(stream.cancelled_, ElementsAre(stream.sent_[0].id()));
  EXPECT_THAT(stream.buffered_seen_, ElementsAre(1, 0));
}

TEST_F(EngineTest, NothingIsDispatchedAfterStopDispatching) {
  FakeWorkerStream stream("s");
  const int64_t id = Connect(*engine_, stream, 10);
  engine_->Submit(MakeEvent(0, 0, "a"), 1);
  engine_->Submit(MakeEvent(0, 1, "a"), 1);
  const uint64_t first = stream.TakeHeld()[0].id();
  engine_->StopDispatching();
  engine_->OnResults(id, ResultFor(first, v1::Result::OK));
  EXPECT_THAT(stream.held(), IsEmpty());
  EXPECT_EQ(CommitOffset(*engine_, 0), 1);  // results still count
}

TEST_F(EngineTest, DuplicateRecordInOneAssignmentIsIgnored) {
  FakeWorkerStream stream("s");
  Connect(*engine_, stream, 100);
  engine_->Submit(MakeEvent(0, 5, "a"), 10);
  engine_->Submit(MakeEvent(0, 5, "a"), 10);
  EXPECT_EQ(engine_->Buffered(), 1);
  EXPECT_EQ(engine_->Snapshot().counters.duplicate_records, 1);
}

TEST_F(EngineTest, DeliveryIdsCarryTheEpochAndStayUnique) {
  FakeWorkerStream stream("s");
  Connect(*engine_, stream, 100);
  engine_->Submit(MakeEvent(0, 0, "a"), 1);
  engine_->Submit(MakeEvent(1, 0, "b"), 1);
  std::vector<v1::Event> sent = stream.TakeHeld();
  ASSERT_EQ(sent.size(), 2u);
  EXPECT_NE(sent[0].id(), sent[1].id());
  // Partitions 0 and 1 were assigned with epochs 1 and 2.
  EXPECT_EQ(sent[0].id() >> 40, 1u);
  EXPECT_EQ(sent[1].id() >> 40, 2u);
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
  engine_->OnReady(engine_->AddStream(0, &orders), 10);
  engine_->OnReady(engine_->AddStream(1, &refunds), 10);
  engine_->Submit(MakeEvent(0, 0, "a", "order"), 10);
  engine_->Submit(MakeEvent(0, 1, "b", "refund"), 10);
  engine_->Submit(MakeEvent(0, 2, "c", "unknown"), 10);
  EXPECT_THAT(Offsets(orders.held()), ElementsAre(0));
  EXPECT_THAT(Offsets(refunds.held()), ElementsAre(1));
  EXPECT_EQ(engine_->Snapshot().counters.failed, 1);
}

}  // namespace
}  // namespace ferry::testing
