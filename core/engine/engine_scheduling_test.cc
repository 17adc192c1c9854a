// The engine's scheduling, with a fake clock and fake worker streams:
// ordering modes, the delay stage, priority classes (weighted round-robin
// across classes, round-robin across the topics of a class) and routing of
// event types no processor handles.
#include <algorithm>
#include <deque>
#include <functional>
#include <iostream>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/engine/engine.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/mocks/engine_fixtures.h"

namespace ferry::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

ProcessorConfig Processor(const std::string& name) {
  ProcessorConfig processor;
  processor.name = name;
  processor.target = "ipv4:127.0.0.1:1";
  processor.max_in_flight = 100000;
  processor.max_batch = 64;
  processor.timeout = absl::Hours(1);
  processor.max_attempts = 3;
  return processor;
}

Config BaseConfig() {
  Config config;
  config.processors.push_back(Processor("p"));
  config.lane_count = 16;
  config.lane_capacity = 100000;
  config.max_buffered_events = 1000000;
  config.max_delayed_events = 1000000;
  return config;
}

// An engine with one processor and one stream; `Worker` plays a worker that
// holds what it was sent and answers when told.
class Harness : public EngineHarness {
 public:
  explicit Harness(const Config& config, DeadLetters dead_letters = DeadLetters::kNone)
      : EngineHarness(config, {}, dead_letters) {}
  void Assign(const std::vector<TopicPartition>& partitions) { engine_->OnAssigned(partitions); }
  void Connect(uint32_t credit) { stream_id_ = ::ferry::testing::Connect(*engine_, stream_, credit); }
  // Moves newly sent events into the worker's hands.
  void Receive() {
    for (v1::Event& event : stream_.TakeHeld()) holding_.push_back(std::move(event));
  }
  // The worker finishes the event it holds at `index` and grants one credit.
  v1::Event Finish(size_t index = 0) {
    v1::Event event = holding_[index];
    holding_.erase(holding_.begin() + static_cast<std::ptrdiff_t>(index));
    engine_->OnResults(stream_id_, ResultFor(event.id(), v1::Result::OK));
    engine_->OnCredit(stream_id_, 1);
    return event;
  }

  FakeWorkerStream stream_{"s"};
  int64_t stream_id_ = 0;
  std::deque<v1::Event> holding_;
};

// ---------------------------------------------------------------- ordering

TEST(OrderingModeTest, KeyOrderIsKeptWithParallelismAcrossKeys) {
  Config config = BaseConfig();
  config.topics = {TopicConfig{"t", Ordering::kKey}};
  Harness h(config);
  h.Assign({{"t", 0}, {"t", 1}});
  constexpr int kKeys = 12;
  constexpr int kPerKey = 20;
  for (int i = 0; i < kKeys * kPerKey; ++i) {
    h.engine_->Submit(MakeEvent({"t", i % 2}, i / 2, "k" + std::to_string(i % kKeys)), 1);
  }
  h.Connect(1000);
  std::mt19937 random(7);
  std::map<std::string, std::vector<int64_t>> order;  // per key, in dispatch order
  std::map<std::string, int32_t> partition_of;
  size_t most_in_flight = 0;
  int finished = 0;
  while (finished < kKeys * kPerKey) {
    h.Receive();
    ASSERT_FALSE(h.holding_.empty()) << "stalled after " << finished;
    // Never two events of one key at the worker at once.
    std::set<std::string> keys;
    for (const v1::Event& event : h.holding_) {
      EXPECT_TRUE(keys.insert(event.key()).second) << "key " << event.key() << " twice";
    }
    most_in_flight = std::max(most_in_flight, h.holding_.size());
    // Results come back in any order.
    const v1::Event done = h.Finish(random() % h.holding_.size());
    order[done.key()].push_back(done.offset());
    partition_of[done.key()] = done.partition();
    ++finished;
  }
  for (const auto& [key, offsets] : order) {
    EXPECT_TRUE(std::is_sorted(offsets.begin(), offsets.end())) << key;
    EXPECT_EQ(offsets.size(), static_cast<size_t>(kPerKey)) << key;
  }
  EXPECT_GE(most_in_flight, 6u) << "keys on different lanes run in parallel";
}

TEST(OrderingModeTest, PartitionModeIsStrictPerPartition) {
  Config config = BaseConfig();
  config.topics = {TopicConfig{"t", Ordering::kPartition}};
  Harness h(config);
  h.Assign({{"t", 0}, {"t", 1}});
  for (int i = 0; i < 50; ++i) {
    // Every key differs.
    h.engine_->Submit(MakeEvent({"t", i % 2}, i / 2, "key-" + std::to_string(i)), 1);
  }
  h.Connect(1000);
  std::map<int32_t, std::vector<int64_t>> order;
  for (int finished = 0; finished < 50; ++finished) {
    h.Receive();
    // One event per partition at a time, whatever the keys.
    std::set<int32_t> partitions;
    for (const v1::Event& event : h.holding_) {
      EXPECT_TRUE(partitions.insert(event.partition()).second);
    }
    ASSERT_FALSE(h.holding_.empty());
    const v1::Event done = h.Finish(h.holding_.size() - 1);
    order[done.partition()].push_back(done.offset());
  }
  for (int32_t p : {0, 1}) {
    ASSERT_EQ(order[p].size(), 25u);
    for (int i = 0; i < 25; ++i) EXPECT_EQ(order[p][i], i) << "partition " << p;
  }
}

TEST(OrderingModeTest, UnorderedReachesMoreConcurrencyThanLanes) {
  Config config = BaseConfig();
  config.lane_count = 4;
  config.topics = {TopicConfig{"u", Ordering::kUnordered}, TopicConfig{"k", Ordering::kKey}};
  Harness h(config);
  h.Assign({{"u", 0}, {"k", 0}});
  h.Connect(1000);
  // One key, one partition: unordered still runs all 100 at once.
  for (int i = 0; i < 100; ++i) h.engine_->Submit(MakeEvent({"u", 0}, i, "same"), 1);
  h.Receive();
  EXPECT_EQ(h.holding_.size(), 100u);
  // 100 keys in KEY mode: no more than the 4 lanes at once.
  h.holding_.clear();
  for (int i = 0; i < 100; ++i) {
    h.engine_->Submit(MakeEvent({"k", 0}, i, "key-" + std::to_string(i)), 1);
  }
  h.Receive();
  EXPECT_LE(h.holding_.size(), 4u);
  EXPECT_GE(h.holding_.size(), 2u);
}

// ------------------------------------------------------------------ delay

class DelayTest : public ::testing::Test {
 protected:
  static Config DelayConfig() {
    Config config = BaseConfig();
    TopicConfig topic{"d"};
    topic.delay = absl::Seconds(10);
    topic.delays["fast"] = absl::ZeroDuration();
    topic.delays["slow"] = absl::Minutes(1);
    config.topics = {topic, TopicConfig{"plain"}};
    config.max_delayed_events = 5;
    config.resume_fraction = 0.5;
    return config;
  }
  DelayTest() : h_(DelayConfig()) {
    h_.Assign({{"d", 0}, {"d", 1}, {"plain", 0}});
    h_.Connect(1000);
  }
  // An event of topic d stamped `age` before now.
  v1::Event Stamped(int32_t partition, int64_t offset, absl::Duration age,
                    const std::string& type = "t") {
    v1::Event event =
        MakeEvent({"d", partition}, offset, absl::StrCat("k", partition, "-", offset), type);
    event.set_timestamp_ms(absl::ToUnixMillis(h_.clock_.Now() - age));
    return event;
  }
  std::vector<int64_t> SentOffsets() { return Offsets(h_.stream_.TakeHeld()); }
  void Tick(absl::Duration d) {
    h_.clock_.Advance(d);
    h_.engine_->OnTimer();
  }

  // d/0 and d/1 each have an event in the delay stage; `drop` drops d/0's,
  // and only d/1's is left, leaving when it is due.
  void ExpectDelayedEventsOfD0Dropped(const std::function<void(Engine&)>& drop) {
    h_.engine_->Submit(Stamped(0, 0, absl::ZeroDuration()), 1);
    h_.engine_->Submit(Stamped(1, 0, absl::ZeroDuration()), 1);
    drop(*h_.engine_);
    EXPECT_EQ(h_.engine_->Buffered(), 1);
    EXPECT_EQ(h_.engine_->Snapshot().delay_stage_events, 1);
    Tick(absl::Seconds(10));
    std::vector<v1::Event> sent = h_.stream_.TakeHeld();
    ASSERT_EQ(sent.size(), 1u);
    EXPECT_EQ(sent[0].partition(), 1);
  }

  Harness h_;
};

TEST_F(DelayTest, NothingIsDispatchedBeforeTimestampPlusDelay) {
  h_.engine_->Submit(Stamped(0, 0, absl::Seconds(3)), 1);  // due in 7s
  EXPECT_THAT(SentOffsets(), IsEmpty());
  Tick(absl::Milliseconds(6990));
  EXPECT_THAT(SentOffsets(), IsEmpty());
  EXPECT_EQ(h_.engine_->Snapshot().delay_stage_events, 1);
  Tick(absl::Milliseconds(10));
  std::vector<v1::Event> sent = h_.stream_.TakeHeld();
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_GE(h_.clock_.Now(), absl::FromUnixMillis(sent[0].timestamp_ms()) + absl::Seconds(10));
  EXPECT_EQ(h_.engine_->Snapshot().delay_stage_events, 0);
}

TEST_F(DelayTest, TheDelayCountsFromTheRecordTimestampNotFromWhenItWasRead) {
  // Read after a restart, long after it was produced: no further wait.
  h_.engine_->Submit(Stamped(0, 0, absl::Seconds(30)), 1);
  EXPECT_THAT(SentOffsets(), ElementsAre(0));
  // A topic without a delay never waits.
  h_.engine_->Submit(MakeEvent({"plain", 0}, 0, "a"), 1);
  EXPECT_EQ(h_.stream_.TakeHeld().size(), 1u);
}

TEST_F(DelayTest, APartitionLeavesInOffsetOrderAndPartitionsAreIndependent) {
  h_.engine_->Submit(Stamped(0, 0, absl::Seconds(0)), 1);  // due at +10s
  // Stamped earlier, but behind offset 0: it waits for it (late, never early).
  h_.engine_->Submit(Stamped(0, 1, absl::Seconds(5)), 1);
  h_.engine_->Submit(Stamped(1, 0, absl::Seconds(5)), 1);  // due at +5s
  Tick(absl::Seconds(5));
  std::vector<v1::Event> sent = h_.stream_.TakeHeld();
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].partition(), 1);
  Tick(absl::Seconds(5));
  EXPECT_THAT(SentOffsets(), ElementsAre(0, 1));
}

TEST_F(DelayTest, PerTypeDelaysAndAShortDelayIsNotHeldUpByALongOne) {
  h_.engine_->Submit(Stamped(0, 0, absl::ZeroDuration(), "slow"), 1);  // 1m
  h_.engine_->Submit(Stamped(0, 1, absl::ZeroDuration(), "t"), 1);     // 10s
  h_.engine_->Submit(Stamped(0, 2, absl::ZeroDuration(), "fast"), 1);  // none
  EXPECT_THAT(SentOffsets(), ElementsAre(2));
  Tick(absl::Seconds(10));
  EXPECT_THAT(SentOffsets(), ElementsAre(1));
  Tick(absl::Seconds(49));
  EXPECT_THAT(SentOffsets(), IsEmpty());
  Tick(absl::Seconds(1));
  EXPECT_THAT(SentOffsets(), ElementsAre(0));
}

TEST_F(DelayTest, CommitsWaitForDelayedOffsets) {
  h_.engine_->Submit(Stamped(0, 0, absl::ZeroDuration()), 1);
  h_.engine_->Submit(Stamped(0, 1, absl::ZeroDuration(), "fast"), 1);
  h_.Receive();
  ASSERT_EQ(h_.holding_.size(), 1u);
  h_.Finish();
  EXPECT_THAT(h_.engine_->PendingCommits(), IsEmpty());  // offset 0 still waits
  Tick(absl::Seconds(10));
  h_.Receive();
  h_.Finish();
  std::vector<CommitPosition> commits = h_.engine_->PendingCommits();
  ASSERT_EQ(commits.size(), 1u);
  EXPECT_EQ(commits[0].offset, 2);
}

TEST_F(DelayTest, AFullDelayStagePausesFetchingAndResumesUnderTheLowMark) {
  // The consumer's loop: submit while not over the high watermark.
  int64_t offset = 0;
  while (!h_.engine_->OverHighWatermark()) {
    ASSERT_LT(offset, 1000) << "the delay stage never filled";
    h_.engine_->Submit(Stamped(0, offset, absl::Seconds(10) - absl::Seconds(offset)), 1);
    ++offset;
  }
  // Offset 0 was due at once (stamped 10s ago) and went to the worker;
  // offsets 1..5 (due 1..5s from now) fill the stage to max_delayed_events,
  // far under the buffered budget, and the consumer stops there.
  EXPECT_EQ(offset, 6);
  EXPECT_EQ(h_.engine_->Snapshot().delay_stage_events, 5);
  EXPECT_EQ(h_.engine_->Buffered(), 6);
  EXPECT_FALSE(h_.engine_->UnderLowWatermark());
  // Time frees the stage: offsets 1 and 2 are due.
  Tick(absl::Seconds(2));
  EXPECT_FALSE(h_.engine_->OverHighWatermark());
  EXPECT_FALSE(h_.engine_->UnderLowWatermark());  // 3 held > 5 * 0.5
  Tick(absl::Seconds(1));
  EXPECT_TRUE(h_.engine_->UnderLowWatermark());
}

TEST_F(DelayTest, RevokeDropsDelayedEvents) {
  ExpectDelayedEventsOfD0Dropped([](Engine& engine) { engine.OnRevoked({{"d", 0}}); });
}

TEST_F(DelayTest, AnOffsetResetDropsDelayedEvents) {
  ExpectDelayedEventsOfD0Dropped([](Engine& engine) { engine.ResetPartition({"d", 0}); });
}

TEST_F(DelayTest, ADueEventOfAPausedPartitionWaitsForTheResume) {
  h_.engine_->SetPaused({{"d", 0}});
  h_.engine_->Submit(Stamped(0, 0, absl::ZeroDuration()), 1);
  Tick(absl::Seconds(10));
  EXPECT_THAT(SentOffsets(), IsEmpty());
  h_.engine_->SetPaused({});
  EXPECT_THAT(SentOffsets(), ElementsAre(0));
}

TEST_F(DelayTest, ShutdownDoesNotWaitForEventsStillInTheDelayStage) {
  h_.engine_->Submit(Stamped(0, 0, absl::ZeroDuration()), 1);
  h_.engine_->Submit(Stamped(1, 0, absl::ZeroDuration(), "fast"), 1);
  EXPECT_EQ(h_.engine_->Buffered(), 2);
  EXPECT_EQ(h_.engine_->Drainable(), 1);  // only the one at the worker
}

TEST_F(DelayTest, AFutureOrMissingTimestampWaitsTheDelayFromWhenItWasRead) {
  v1::Event future = Stamped(0, 0, -absl::Hours(5));  // a skewed producer clock
  h_.engine_->Submit(future, 1);
  v1::Event unstamped = MakeEvent({"d", 1}, 0, "x");
  h_.engine_->Submit(unstamped, 1);
  Tick(absl::Milliseconds(9990));
  EXPECT_THAT(SentOffsets(), IsEmpty());
  Tick(absl::Milliseconds(10));
  EXPECT_EQ(h_.stream_.TakeHeld().size(), 2u);
}

// -------------------------------------------------------------- priorities

// Classes high 6, medium 3, low 1; topics hi, med, lo (and hi2 in high).
Config PriorityConfig(Ordering ordering = Ordering::kKey) {
  Config config = BaseConfig();
  config.priority_classes = {{"high", 6}, {"medium", 3}, {"low", 1}};
  config.default_priority = "low";
  TopicConfig hi{"hi", ordering};
  hi.priority = "high";
  TopicConfig hi2{"hi2", ordering};
  hi2.priority = "high";
  TopicConfig med{"med", ordering};
  med.priority = "medium";
  config.topics = {hi, hi2, med, TopicConfig{"lo", ordering}};
  return config;
}

// A worker with a fixed capacity: `credit` events at once, finishing the
// oldest first and granting one credit each time (one dispatch per step).
class PriorityTest : public ::testing::Test {
 protected:
  explicit PriorityTest(Config config = PriorityConfig()) : h_(config) {
    h_.Assign({{"hi", 0}, {"hi2", 0}, {"med", 0}, {"lo", 0}});
  }
  void Backlog(const std::string& topic, int count) {
    int64_t& next = next_offset_[topic];
    for (int i = 0; i < count; ++i, ++next) {
      h_.engine_->Submit(
          MakeEvent({topic, 0}, next, topic + "-key-" + std::to_string(next % 200)), 1);
    }
  }
  // Runs `steps` finish-one/dispatch-one steps; returns the topics of the
  // events dispatched in them, in order.
  std::vector<std::string> Run(int steps) {
    std::vector<std::string> dispatched;
    for (int i = 0; i < steps; ++i) {
      h_.Finish();
      for (v1::Event& event : h_.stream_.TakeHeld()) {
        dispatched.push_back(event.topic());
        h_.holding_.push_back(std::move(event));
      }
    }
    return dispatched;
  }
  static std::map<std::string, int> Count(const std::vector<std::string>& topics) {
    std::map<std::string, int> count;
    for (const std::string& topic : topics) ++count[topic];
    return count;
  }

  Harness h_;
  std::map<std::string, int64_t> next_offset_;
};

TEST_F(PriorityTest, SharesAreWithinTenPercentOf631WithEveryClassBacklogged) {
  Backlog("hi", 5000);
  Backlog("med", 5000);
  Backlog("lo", 5000);
  h_.Connect(8);  // the worker's capacity: 8 events at a time
  h_.Receive();
  ASSERT_EQ(h_.holding_.size(), 8u);
  const std::map<std::string, int> count = Count(Run(2000));
  const double total = 2000;
  EXPECT_NEAR(count.at("hi") / total, 0.6, 0.06) << count.at("hi");
  EXPECT_NEAR(count.at("med") / total, 0.3, 0.03) << count.at("med");
  EXPECT_NEAR(count.at("lo") / total, 0.1, 0.01) << count.at("lo");
  RecordProperty("shares", absl::StrCat(count.at("hi"), ":", count.at("med"), ":", count.at("lo")));
  std::cout << "shares over 2000 dispatches: hi=" << count.at("hi") << " med=" << count.at("med")
            << " lo=" << count.at("lo") << std::endl;
}

TEST_F(PriorityTest, OnlyLowBackloggedGetsAllTheCapacity) {
  Backlog("lo", 3000);
  h_.Connect(8);
  h_.Receive();
  ASSERT_EQ(h_.holding_.size(), 8u);
  const std::vector<std::string> dispatched = Run(1000);
  // One dispatch per finished event: the whole capacity, all of it to low.
  EXPECT_EQ(dispatched.size(), 1000u);
  EXPECT_EQ(Count(dispatched)["lo"], 1000);
  EXPECT_EQ(h_.holding_.size(), 8u);
}

TEST_F(PriorityTest, AnIdleClassLendsItsShareAndGetsItBackWhenItHasWork) {
  Backlog("hi", 3000);
  Backlog("lo", 3000);
  h_.Connect(8);
  h_.Receive();
  std::map<std::string, int> count = Count(Run(700));
  EXPECT_NEAR(count["hi"], 600, 6);  // medium idle: high and low share 6:1
  EXPECT_NEAR(count["lo"], 100, 6);
  Backlog("med", 3000);
  count = Count(Run(1000));
  EXPECT_NEAR(count["hi"], 600, 10);
  EXPECT_NEAR(count["med"], 300, 10);
  EXPECT_NEAR(count["lo"], 100, 10);
}

TEST_F(PriorityTest, ANewSmallTaskIsServedWithinBoundedRoundsBehindALargeOne) {
  // A large task (topic hi) of the high class is backlogged, and so is low.
  Backlog("hi", 20000);
  Backlog("lo", 20000);
  h_.Connect(8);
  h_.Receive();
  Run(300);
  // A small task of the same class arrives: 5 events on 5 keys.
  for (int i = 0; i < 5; ++i) {
    h_.engine_->Submit(MakeEvent({"hi2", 0}, i, "small-" + std::to_string(i)), 1);
  }
  // Round-robin across the class's topics: the small task gets every other
  // high pick, so it is done within a few rounds, not after 19,000+ events.
  const std::vector<std::string> dispatched = Run(40);
  std::vector<size_t> at;
  for (size_t i = 0; i < dispatched.size(); ++i) {
    if (dispatched[i] == "hi2") at.push_back(i);
  }
  ASSERT_EQ(at.size(), 5u) << "the small task was not served within 40 dispatches";
  EXPECT_LE(at.back(), 20u);
  // Meanwhile low still had its share.
  EXPECT_GE(Count(dispatched)["lo"], 3);
}

TEST(PriorityUnorderedTest, SharesHoldForUnorderedTopicsToo) {
  Harness h(PriorityConfig(Ordering::kUnordered));
  h.Assign({{"hi", 0}, {"hi2", 0}, {"med", 0}, {"lo", 0}});
  for (const std::string topic : {"hi", "med", "lo"}) {
    for (int i = 0; i < 3000; ++i) h.engine_->Submit(MakeEvent({topic, 0}, i, "one-key"), 1);
  }
  h.Connect(10);
  std::map<std::string, int> count;
  for (int round = 0; round < 100; ++round) {
    h.Receive();
    for (const v1::Event& event : h.holding_) ++count[event.topic()];
    while (!h.holding_.empty()) {
      h.engine_->OnResults(h.stream_id_, ResultFor(h.holding_.front().id(), v1::Result::OK));
      h.holding_.pop_front();
    }
    h.engine_->OnCredit(h.stream_id_, 10);
  }
  EXPECT_EQ(count["hi"], 600);
  EXPECT_EQ(count["med"], 300);
  EXPECT_EQ(count["lo"], 100);
}

TEST(PriorityTypeTest, EventTypesCanHaveTheirOwnClass) {
  Config config = BaseConfig();
  config.priority_classes = {{"high", 9}, {"low", 1}};
  config.default_priority = "low";
  config.priority_by_type["urgent"] = "high";
  config.topics = {TopicConfig{"t", Ordering::kUnordered}};
  Harness h(config);
  h.Assign({{"t", 0}});
  for (int i = 0; i < 2000; ++i) {
    h.engine_->Submit(MakeEvent({"t", 0}, i, "k", i % 2 == 0 ? "urgent" : "routine"), 1);
  }
  h.Connect(10);
  h.Receive();
  std::map<std::string, int> count;
  for (int i = 0; i < 500; ++i) {
    const v1::Event done = h.Finish();
    h.Receive();
    ++count[h.holding_.back().type()];
    (void)done;
  }
  EXPECT_NEAR(count["urgent"], 450, 1);
  EXPECT_NEAR(count["routine"], 50, 1);
}

// ----------------------------------------------------------------- routing

TEST(RoutingPolicyTest, AnUnknownTypeAtRunTimeIsATerminalFailureByPolicyNeverADrop) {
  Config config = BaseConfig();
  config.topics = {TopicConfig{"t"}};
  config.processors[0].event_types = {"order"};
  config.on_failure = FailurePolicy::kDeadLetter;
  config.dead_letter_topic = "dlq";
  Harness h(config, EngineHarness::DeadLetters::kFakeWriter);
  FakeDeadLetterWriter& writer = h.writer_;
  h.Assign({{"t", 0}});
  h.Connect(10);
  h.engine_->Submit(MakeEvent({"t", 0}, 0, "a", "mystery"), 1);
  h.engine_->Submit(MakeEvent({"t", 0}, 1, "b", "order"), 1);
  ASSERT_EQ(writer.written().size(), 1u);
  EXPECT_THAT(writer.written()[0].error, HasSubstr("no processor handles event type \"mystery\""));
  EXPECT_EQ(writer.written()[0].source_offset, 0);
  EXPECT_EQ(writer.written()[0].processor, "");
  EXPECT_THAT(Offsets(h.stream_.TakeHeld()), ElementsAre(1));
  // Not done until the dead letter is acknowledged.
  EXPECT_THAT(h.engine_->PendingCommits(), IsEmpty());
  writer.Complete();
  ASSERT_EQ(h.engine_->PendingCommits().size(), 1u);
  EXPECT_EQ(h.engine_->PendingCommits()[0].offset, 1);
  EXPECT_EQ(h.engine_->Snapshot().counters.failed, 1);
}

TEST(RoutingPolicyTest, AnUnknownTypeUnderBlockHoldsItsPartition) {
  Config config = BaseConfig();
  config.topics = {TopicConfig{"t"}};
  config.processors[0].event_types = {"order"};
  config.on_failure = FailurePolicy::kBlock;
  Harness h(config);
  h.Assign({{"t", 0}});
  h.Connect(10);
  h.engine_->Submit(MakeEvent({"t", 0}, 0, "a", "mystery"), 1);
  EXPECT_EQ(h.engine_->BlockedPartitions().size(), 1u);
  EXPECT_EQ(h.engine_->Snapshot().counters.blocked, 1);
}

}  // namespace
}  // namespace ferry::testing
