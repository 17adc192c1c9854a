// Operator control of the engine: SetPaused, ResetPartition and SkipOffset,
// driven through fake worker streams, a fake dead-letter writer and a fake
// clock (no sleeps; time moves only when a test advances it).
#include <algorithm>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "core/engine/engine.h"
#include "core/engine/lanes.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/mocks/engine_fixtures.h"

namespace ferry::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
using ::testing::UnorderedElementsAre;

constexpr int kLanes = 16;
const TopicPartition kT0{"t", 0};
const TopicPartition kT1{"t", 1};
const TopicPartition kU0{"u", 0};
const TopicPartition kU1{"u", 1};

// The base engine test config plus an UNORDERED topic "u" ("t" is
// KEY-ordered).
Config TestConfig() {
  Config config = EngineTestConfig();
  config.topics.push_back(TopicConfig{"u", Ordering::kUnordered, {}, {}});
  config.lane_count = kLanes;
  return config;
}

// `count` keys that hash to pairwise different lanes, so one key's busy lane
// never holds back another key of the test by accident.
std::vector<std::string> KeysOnDistinctLanes(int count) {
  std::vector<std::string> keys;
  std::set<int> lanes;
  for (int i = 0; static_cast<int>(keys.size()) < count; ++i) {
    std::string key = "key" + std::to_string(i);
    const int lane = Lanes<int>::LaneFor(Ordering::kKey, "t", 0, key, kLanes);
    if (lanes.insert(lane).second) keys.push_back(std::move(key));
  }
  return keys;
}

// "t/0@3" for each event, in the order given.
std::vector<std::string> Where(const std::vector<v1::Event>& events) {
  std::vector<std::string> where;
  for (const v1::Event& event : events) {
    where.push_back(absl::StrCat(event.topic(), "/", event.partition(), "@", event.offset()));
  }
  return where;
}

const v1::Event* Find(const std::vector<v1::Event>& events, const TopicPartition& tp,
                      int64_t offset) {
  for (const v1::Event& event : events) {
    if (event.topic() == tp.topic && event.partition() == tp.partition &&
        event.offset() == offset) {
      return &event;
    }
  }
  return nullptr;
}

class EngineControlTest : public ::testing::Test, public EngineHarness {
 protected:
  EngineControlTest() { Start(TestConfig()); }

  void Start(const Config& config, DeadLetters dead_letters = DeadLetters::kNone) {
    stream_ = std::make_unique<FakeWorkerStream>("s");
    EngineHarness::Start(config, {kT0, kT1, kU0, kU1}, dead_letters);
    stream_id_ = Connect(*engine_, *stream_, 100);
  }

  // Under the block policy, key a's t/0@0 fails with t/0@1 queued behind
  // it: t/0 is held.
  void BlockT0() {
    Config config = TestConfig();
    config.on_failure = FailurePolicy::kBlock;
    Start(config);
    const std::string& a = keys_[0];
    engine_->Submit(MakeEvent(kT0, 0, a), 10);
    engine_->Submit(MakeEvent(kT0, 1, a), 10);
    std::vector<v1::Event> sent = stream_->TakeHeld();
    ASSERT_THAT(Where(sent), ElementsAre("t/0@0"));
    engine_->OnResults(stream_id_, ResultFor(sent[0].id(), v1::Result::FAIL));
    ASSERT_THAT(engine_->BlockedPartitions(), ElementsAre(kT0));
  }

  void Ok(const v1::Event* event) {
    ASSERT_NE(event, nullptr);
    engine_->OnResults(stream_id_, ResultFor(event->id(), v1::Result::OK));
  }

  PartitionSnapshot PartitionOf(const TopicPartition& tp) const {
    for (const PartitionSnapshot& partition : engine_->Snapshot().partitions) {
      if (partition.partition == tp) return partition;
    }
    ADD_FAILURE() << tp.ToString() << " is not in the snapshot";
    return {};
  }

  std::unique_ptr<FakeWorkerStream> stream_;
  int64_t stream_id_ = 0;
  const std::vector<std::string> keys_ = KeysOnDistinctLanes(4);
};

// ---- SetPaused ----

TEST_F(EngineControlTest, PausedPartitionIsNotDispatchedWhileOthersAre) {
  const std::string& a = keys_[0];
  const std::string& b = keys_[1];
  engine_->Submit(MakeEvent(kT0, 0, a), 10);
  engine_->Submit(MakeEvent(kT0, 1, a), 10);  // queued behind @0 (same key)
  engine_->Submit(MakeEvent(kT0, 2, a), 10);
  std::vector<v1::Event> sent = stream_->TakeHeld();
  ASSERT_THAT(Where(sent), ElementsAre("t/0@0"));
  const v1::Event in_flight = sent[0];

  engine_->SetPaused({kT0});
  // Submitted after the pause, on a free lane: parked all the same.
  engine_->Submit(MakeEvent(kT0, 3, b), 10);
  // The other partition goes on, on free lanes and on the paused one's key.
  engine_->Submit(MakeEvent(kT1, 0, keys_[2]), 10);
  engine_->Submit(MakeEvent(kT1, 1, keys_[3]), 10);
  EXPECT_THAT(Where(stream_->TakeHeld()), ElementsAre("t/1@0", "t/1@1"));

  PartitionSnapshot t0 = PartitionOf(kT0);
  EXPECT_TRUE(t0.paused);
  EXPECT_EQ(t0.parked, 3);  // @1, @2, @3
  EXPECT_EQ(t0.in_flight, 1);
  EXPECT_EQ(t0.buffered, 4);
  const PartitionSnapshot t1 = PartitionOf(kT1);
  EXPECT_FALSE(t1.paused);
  EXPECT_EQ(t1.parked, 0);

  // The event in flight before the pause finishes and commits; its key's
  // next event stays parked.
  engine_->OnResults(stream_id_, ResultFor(in_flight.id(), v1::Result::OK));
  EXPECT_EQ(CommitOffset(*engine_, kT0), 1);
  EXPECT_THAT(stream_->held(), IsEmpty());
  EXPECT_EQ(PartitionOf(kT0).parked, 3);

  // Resume: the parked events go, one per key, in offset order per key.
  engine_->SetPaused({});
  sent = stream_->TakeHeld();
  EXPECT_THAT(Where(sent), UnorderedElementsAre("t/0@1", "t/0@3"));
  t0 = PartitionOf(kT0);
  EXPECT_FALSE(t0.paused);
  EXPECT_EQ(t0.parked, 0);
  Ok(Find(sent, kT0, 1));
  sent = stream_->TakeHeld();
  EXPECT_THAT(Where(sent), ElementsAre("t/0@2"));
  Ok(Find(sent, kT0, 2));
  EXPECT_EQ(CommitOffset(*engine_, kT0), 3);  // @3 is still in flight
}

TEST_F(EngineControlTest, PausingWithoutCreditParksQueuedEventsOfEveryKey) {
  // No credit left: events of free lanes queue too, and the pause must park
  // them rather than let them go when credit comes.
  FakeWorkerStream starved("starved");
  Engine& engine = EngineHarness::Start(TestConfig(), {kT0, kT1}, DeadLetters::kNone);
  const int64_t id = engine.AddStream(0, &starved);
  engine.OnReady(id, 1);
  engine.Submit(MakeEvent(kT0, 0, keys_[0]), 1);  // takes the only credit
  engine.Submit(MakeEvent(kT0, 1, keys_[1]), 1);
  engine.Submit(MakeEvent(kT1, 0, keys_[2]), 1);
  engine.Submit(MakeEvent(kT0, 2, keys_[3]), 1);
  ASSERT_THAT(Where(starved.TakeHeld()), ElementsAre("t/0@0"));
  engine.SetPaused({kT0});
  engine.OnCredit(id, 10);
  EXPECT_THAT(Where(starved.TakeHeld()), ElementsAre("t/1@0"));
  engine.SetPaused({});
  EXPECT_THAT(Where(starved.TakeHeld()), UnorderedElementsAre("t/0@1", "t/0@2"));
}

TEST_F(EngineControlTest, PartitionAssignedLaterWhileInThePausedSetStartsPaused) {
  const TopicPartition t2{"t", 2};
  engine_->SetPaused({t2});  // not assigned yet
  EXPECT_FALSE(PartitionOf(kT0).paused);
  engine_->OnAssigned({t2});
  engine_->Submit(MakeEvent(t2, 0, keys_[0]), 10);
  engine_->Submit(MakeEvent(kT0, 0, keys_[1]), 10);
  EXPECT_THAT(Where(stream_->TakeHeld()), ElementsAre("t/0@0"));
  PartitionSnapshot snapshot = PartitionOf(t2);
  EXPECT_TRUE(snapshot.paused);
  EXPECT_EQ(snapshot.parked, 1);

  engine_->SetPaused({});
  EXPECT_THAT(Where(stream_->TakeHeld()), ElementsAre("t/2@0"));
  EXPECT_FALSE(PartitionOf(t2).paused);
}

TEST_F(EngineControlTest, RevokedAndReassignedPausedPartitionStaysPaused) {
  engine_->SetPaused({kT0});
  engine_->OnRevoked({kT0});
  engine_->OnAssigned({kT0});
  engine_->Submit(MakeEvent(kT0, 0, keys_[0]), 10);
  EXPECT_THAT(stream_->held(), IsEmpty());
  EXPECT_TRUE(PartitionOf(kT0).paused);
  engine_->SetPaused({});
  EXPECT_THAT(Where(stream_->TakeHeld()), ElementsAre("t/0@0"));
}

TEST_F(EngineControlTest, UnorderedTopicPausesAndResumesInOffsetOrder) {
  // One credit: later events of the unordered topic wait in its queue.
  FakeWorkerStream starved("starved");
  Engine& engine = EngineHarness::Start(TestConfig(), {kU0, kU1}, DeadLetters::kNone);
  const int64_t id = engine.AddStream(0, &starved);
  engine.OnReady(id, 1);
  engine.Submit(MakeEvent(kU0, 0, "x"), 1);
  engine.Submit(MakeEvent(kU0, 1, "x"), 1);  // queued (no credit)
  engine.Submit(MakeEvent(kU0, 2, "y"), 1);
  std::vector<v1::Event> sent = starved.TakeHeld();
  ASSERT_THAT(Where(sent), ElementsAre("u/0@0"));
  const v1::Event in_flight = sent[0];

  engine.SetPaused({kU0});
  engine.Submit(MakeEvent(kU0, 3, "z"), 1);
  engine.Submit(MakeEvent(kU1, 0, "x"), 1);
  engine.OnCredit(id, 10);
  EXPECT_THAT(Where(starved.TakeHeld()), ElementsAre("u/1@0"));
  EXPECT_EQ(engine.Snapshot().partitions[0].partition, kU0);
  EXPECT_TRUE(engine.Snapshot().partitions[0].paused);
  EXPECT_EQ(engine.Snapshot().partitions[0].parked, 3);

  // In flight before the pause: finishes and commits.
  engine.OnResults(id, ResultFor(in_flight.id(), v1::Result::OK));
  bool committed = false;
  for (const CommitPosition& position : engine.PendingCommits()) {
    if (position.partition == kU0) {
      committed = true;
      EXPECT_EQ(position.offset, 1);
    }
  }
  EXPECT_TRUE(committed);
  EXPECT_THAT(starved.held(), IsEmpty());

  engine.SetPaused({});
  EXPECT_THAT(Where(starved.TakeHeld()), ElementsAre("u/0@1", "u/0@2", "u/0@3"));
  EXPECT_EQ(engine.Snapshot().partitions[0].parked, 0);
}

TEST_F(EngineControlTest, RetryInBackoffWhenPausedStillFinishes) {
  // engine.h: "in-flight events and retries finish and commit" while paused.
  engine_->Submit(MakeEvent(kT0, 0, keys_[0]), 10);
  std::vector<v1::Event> sent = stream_->TakeHeld();
  ASSERT_THAT(Where(sent), ElementsAre("t/0@0"));
  engine_->OnResults(stream_id_, ResultFor(sent[0].id(), v1::Result::RETRY));
  ASSERT_EQ(engine_->Snapshot().delayed_events, 1);
  engine_->SetPaused({kT0});
  clock_.Advance(absl::Seconds(5));  // past any jittered backoff (<= 1s)
  engine_->OnTimer();
  sent = stream_->TakeHeld();
  ASSERT_THAT(Where(sent), ElementsAre("t/0@0"));
  EXPECT_EQ(sent[0].attempt(), 2);
  Ok(Find(sent, kT0, 0));
  EXPECT_EQ(CommitOffset(*engine_, kT0), 1);
}

// ---- ResetPartition ----

TEST_F(EngineControlTest, ResetMakesLateResultsStaleAndAcceptsALowerOffset) {
  const std::string& a = keys_[0];
  const std::string& b = keys_[1];
  engine_->Submit(MakeEvent(kT0, 9, keys_[2]), 10);
  engine_->Submit(MakeEvent(kT0, 10, a), 10);
  engine_->Submit(MakeEvent(kT0, 11, b), 10);
  engine_->Submit(MakeEvent(kT0, 12, a), 10);  // queued behind @10
  engine_->Submit(MakeEvent(kT1, 0, keys_[3]), 10);
  std::vector<v1::Event> sent = stream_->TakeHeld();
  ASSERT_THAT(Where(sent), UnorderedElementsAre("t/0@9", "t/0@10", "t/0@11", "t/1@0"));
  Ok(Find(sent, kT0, 9));
  const std::vector<CommitPosition> before = engine_->PendingCommits();
  ASSERT_EQ(CommitOffset(*engine_, kT0), 10);

  engine_->ResetPartition(kT0);
  PartitionSnapshot t0 = PartitionOf(kT0);
  EXPECT_EQ(t0.buffered, 0);
  EXPECT_EQ(t0.in_flight, 0);
  EXPECT_EQ(t0.pending, 0u);
  EXPECT_EQ(t0.commit_offset, std::nullopt);
  EXPECT_EQ(CommitOffset(*engine_, kT0), std::nullopt);
  EXPECT_EQ(engine_->Buffered(), 1);  // t/1@0
  EXPECT_THAT(stream_->held(), IsEmpty());  // the queued @12 is dropped, not sent
  // A position computed before the reset must not be committed after it.
  for (const CommitPosition& position : engine_->StillCurrent(before)) {
    EXPECT_FALSE(position.partition == kT0) << "a pre-reset position is still current";
  }

  // The results of the events in flight before the reset are stale.
  const int64_t stale = engine_->Snapshot().counters.stale_results;
  Ok(Find(sent, kT0, 10));
  Ok(Find(sent, kT0, 11));
  EXPECT_EQ(engine_->Snapshot().counters.stale_results, stale + 2);
  EXPECT_EQ(CommitOffset(*engine_, kT0), std::nullopt);
  EXPECT_EQ(engine_->Snapshot().counters.acked, 1);  // only @9, before the reset

  // A replay from a lower offset is accepted (the key's lane is free again)
  // and commits normally.
  engine_->Submit(MakeEvent(kT0, 5, a), 10);
  engine_->Submit(MakeEvent(kT0, 6, a), 10);
  EXPECT_EQ(engine_->Snapshot().counters.duplicate_records, 0);
  std::vector<v1::Event> replay = stream_->TakeHeld();
  ASSERT_THAT(Where(replay), ElementsAre("t/0@5"));
  Ok(Find(replay, kT0, 5));
  replay = stream_->TakeHeld();
  ASSERT_THAT(Where(replay), ElementsAre("t/0@6"));
  Ok(Find(replay, kT0, 6));
  EXPECT_EQ(CommitOffset(*engine_, kT0), 7);
  EXPECT_EQ(engine_->StillCurrent(engine_->PendingCommits()).size(),
            engine_->PendingCommits().size());

  // The other partition was untouched.
  EXPECT_EQ(PartitionOf(kT1).in_flight, 1);
  Ok(Find(sent, kT1, 0));
  EXPECT_EQ(CommitOffset(*engine_, kT1), 1);
}

TEST_F(EngineControlTest, ResetDropsParkedAndRetryingEventsOfThePartition) {
  engine_->Submit(MakeEvent(kT0, 0, keys_[0]), 10);
  std::vector<v1::Event> sent = stream_->TakeHeld();
  ASSERT_EQ(sent.size(), 1u);
  engine_->OnResults(stream_id_, ResultFor(sent[0].id(), v1::Result::RETRY));
  engine_->SetPaused({kT0});
  engine_->Submit(MakeEvent(kT0, 1, keys_[1]), 10);
  ASSERT_EQ(engine_->Snapshot().delayed_events, 1);
  ASSERT_EQ(PartitionOf(kT0).parked, 1);

  engine_->ResetPartition(kT0);
  EXPECT_EQ(engine_->Snapshot().delayed_events, 0);
  EXPECT_EQ(PartitionOf(kT0).parked, 0);
  EXPECT_EQ(PartitionOf(kT0).buffered, 0);
  EXPECT_EQ(engine_->Buffered(), 0);
  // The backoff ending dispatches nothing of the dropped retry.
  engine_->SetPaused({});
  clock_.Advance(absl::Seconds(5));
  engine_->OnTimer();
  EXPECT_THAT(stream_->held(), IsEmpty());
}

TEST_F(EngineControlTest, ResetReleasesAPartitionHeldByABlockFailure) {
  ASSERT_NO_FATAL_FAILURE(BlockT0());
  const uint64_t generation = engine_->BlockedGeneration();

  engine_->ResetPartition(kT0);
  EXPECT_THAT(engine_->BlockedPartitions(), IsEmpty());
  EXPECT_NE(engine_->BlockedGeneration(), generation);
  EXPECT_EQ(engine_->Buffered(), 0);
  EXPECT_THAT(stream_->held(), IsEmpty());  // the dropped @1 is not sent
  // The key's lane is free for the replay.
  engine_->Submit(MakeEvent(kT0, 0, keys_[0]), 10);
  EXPECT_THAT(Where(stream_->TakeHeld()), ElementsAre("t/0@0"));
}

// ---- SkipOffset ----

TEST_F(EngineControlTest, SkipInFlightEventMarksItDoneWithoutADeadLetterTopic) {
  const std::string& a = keys_[0];
  engine_->Submit(MakeEvent(kT0, 0, a), 10);
  engine_->Submit(MakeEvent(kT0, 1, a), 10);  // waits behind @0
  std::vector<v1::Event> sent = stream_->TakeHeld();
  ASSERT_THAT(Where(sent), ElementsAre("t/0@0"));
  const uint64_t stuck = sent[0].id();

  absl::StatusOr<std::string> outcome = engine_->SkipOffset(kT0, 0);
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  EXPECT_EQ(*outcome, "marked_done");
  EXPECT_THAT(stream_->cancelled(), ElementsAre(stuck));
  EXPECT_EQ(CommitOffset(*engine_, kT0), 1);
  EXPECT_EQ(engine_->Snapshot().counters.skipped, 1);
  // The key's lane moves on.
  EXPECT_THAT(Where(stream_->TakeHeld()), ElementsAre("t/0@1"));
  // A late answer for the skipped event is stale.
  const int64_t stale = engine_->Snapshot().counters.stale_results;
  engine_->OnResults(stream_id_, ResultFor(stuck, v1::Result::OK));
  EXPECT_EQ(engine_->Snapshot().counters.stale_results, stale + 1);
  EXPECT_EQ(engine_->Snapshot().counters.acked, 0);
}

TEST_F(EngineControlTest, SkipWithDeadLetterTopicIsDoneOnlyOnceTheWriterAcknowledges) {
  Config config = TestConfig();
  config.dead_letter_topic = "dlq";
  Start(config, DeadLetters::kFakeWriter);
  FakeDeadLetterWriter& writer = writer_;
  const std::string& a = keys_[0];
  v1::Event event = MakeEvent(kT0, 0, a);
  event.set_payload("body");
  engine_->Submit(event, 10, std::string("record-key"));
  engine_->Submit(MakeEvent(kT0, 1, a), 10);
  std::vector<v1::Event> sent = stream_->TakeHeld();
  ASSERT_THAT(Where(sent), ElementsAre("t/0@0"));

  absl::StatusOr<std::string> outcome = engine_->SkipOffset(kT0, 0);
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  EXPECT_EQ(*outcome, "dead_lettered");
  EXPECT_THAT(stream_->cancelled(), ElementsAre(sent[0].id()));
  ASSERT_EQ(writer.written().size(), 1u);
  const DeadLetter& letter = writer.written()[0];
  EXPECT_EQ(letter.dead_letter_topic, "dlq");
  EXPECT_EQ(letter.source_topic, "t");
  EXPECT_EQ(letter.source_partition, 0);
  EXPECT_EQ(letter.source_offset, 0);
  EXPECT_EQ(letter.payload, "body");
  EXPECT_EQ(letter.key, std::optional<std::string>("record-key"));
  EXPECT_THAT(letter.error, HasSubstr("operator"));
  // Not done before the acknowledgement, but the key's lane moves on.
  EXPECT_EQ(CommitOffset(*engine_, kT0), std::nullopt);
  EXPECT_EQ(engine_->Snapshot().dead_letters_pending, 1);
  std::vector<v1::Event> next = stream_->TakeHeld();
  ASSERT_THAT(Where(next), ElementsAre("t/0@1"));
  Ok(Find(next, kT0, 1));
  EXPECT_EQ(CommitOffset(*engine_, kT0), std::nullopt);  // @0 still holds the commit

  writer.Complete();
  EXPECT_EQ(CommitOffset(*engine_, kT0), 2);
  EXPECT_EQ(engine_->Snapshot().counters.dead_lettered, 1);
  EXPECT_EQ(engine_->Snapshot().dead_letters_pending, 0);
  EXPECT_EQ(engine_->Buffered(), 0);
}

TEST_F(EngineControlTest, SkipReleasesAPartitionHeldByABlockFailure) {
  ASSERT_NO_FATAL_FAILURE(BlockT0());
  ASSERT_THAT(stream_->held(), IsEmpty());
  const uint64_t generation = engine_->BlockedGeneration();

  absl::StatusOr<std::string> outcome = engine_->SkipOffset(kT0, 0);
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  EXPECT_EQ(*outcome, "marked_done");
  EXPECT_THAT(engine_->BlockedPartitions(), IsEmpty());
  EXPECT_NE(engine_->BlockedGeneration(), generation);
  EXPECT_EQ(engine_->Snapshot().blocked_events, 0);
  EXPECT_EQ(CommitOffset(*engine_, kT0), 1);
  EXPECT_THAT(Where(stream_->TakeHeld()), ElementsAre("t/0@1"));
}

TEST_F(EngineControlTest, SkipARetryWaitingOutItsBackoff) {
  const std::string& a = keys_[0];
  engine_->Submit(MakeEvent(kT0, 0, a), 10);
  engine_->Submit(MakeEvent(kT0, 1, a), 10);
  std::vector<v1::Event> sent = stream_->TakeHeld();
  ASSERT_THAT(Where(sent), ElementsAre("t/0@0"));
  engine_->OnResults(stream_id_, ResultFor(sent[0].id(), v1::Result::RETRY));
  ASSERT_EQ(engine_->Snapshot().delayed_events, 1);
  ASSERT_THAT(stream_->held(), IsEmpty());

  absl::StatusOr<std::string> outcome = engine_->SkipOffset(kT0, 0);
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  EXPECT_EQ(*outcome, "marked_done");
  EXPECT_EQ(engine_->Snapshot().delayed_events, 0);
  EXPECT_EQ(CommitOffset(*engine_, kT0), 1);
  EXPECT_THAT(Where(stream_->TakeHeld()), ElementsAre("t/0@1"));
  // The backoff ending brings nothing back.
  clock_.Advance(absl::Seconds(5));
  engine_->OnTimer();
  EXPECT_THAT(stream_->held(), IsEmpty());
}

TEST_F(EngineControlTest, SkipWhilePausedKeepsTheKeysNextEventParked) {
  const std::string& a = keys_[0];
  engine_->Submit(MakeEvent(kT0, 0, a), 10);
  engine_->Submit(MakeEvent(kT0, 1, a), 10);
  std::vector<v1::Event> sent = stream_->TakeHeld();
  ASSERT_THAT(Where(sent), ElementsAre("t/0@0"));
  engine_->SetPaused({kT0});
  absl::StatusOr<std::string> outcome = engine_->SkipOffset(kT0, 0);
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  EXPECT_EQ(*outcome, "marked_done");
  EXPECT_THAT(stream_->cancelled(), ElementsAre(sent[0].id()));
  EXPECT_EQ(CommitOffset(*engine_, kT0), 1);
  EXPECT_THAT(stream_->held(), IsEmpty());
  EXPECT_EQ(PartitionOf(kT0).parked, 1);
  engine_->SetPaused({});
  EXPECT_THAT(Where(stream_->TakeHeld()), ElementsAre("t/0@1"));
}

TEST_F(EngineControlTest, SkipRefusesWhatItCannotSkipAndSaysWhy) {
  // Not assigned here.
  absl::StatusOr<std::string> outcome = engine_->SkipOffset({"t", 7}, 0);
  ASSERT_FALSE(outcome.ok());
  EXPECT_EQ(outcome.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(outcome.status().message()), HasSubstr("not assigned"));

  // Queued behind its key, not dispatched.
  const std::string& a = keys_[0];
  engine_->Submit(MakeEvent(kT0, 0, a), 10);
  engine_->Submit(MakeEvent(kT0, 1, a), 10);
  std::vector<v1::Event> sent = stream_->TakeHeld();
  ASSERT_THAT(Where(sent), ElementsAre("t/0@0"));
  outcome = engine_->SkipOffset(kT0, 1);
  ASSERT_FALSE(outcome.ok());
  EXPECT_EQ(outcome.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(outcome.status().message()), HasSubstr("queued"));
  // It was left alone: it goes after its key's head as usual.
  EXPECT_THAT(stream_->cancelled(), IsEmpty());
  Ok(Find(sent, kT0, 0));
  sent = stream_->TakeHeld();
  ASSERT_THAT(Where(sent), ElementsAre("t/0@1"));
  Ok(Find(sent, kT0, 1));
  EXPECT_EQ(CommitOffset(*engine_, kT0), 2);

  // Already finished.
  outcome = engine_->SkipOffset(kT0, 0);
  ASSERT_FALSE(outcome.ok());
  EXPECT_EQ(outcome.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(outcome.status().message()), HasSubstr("already finished"));
  EXPECT_EQ(engine_->Snapshot().counters.skipped, 0);
  EXPECT_EQ(CommitOffset(*engine_, kT0), 2);
}

TEST_F(EngineControlTest, SkipOfAFinishedOffsetBehindTheCommitBlockerIsRefused) {
  engine_->Submit(MakeEvent(kT0, 0, keys_[0]), 10);
  engine_->Submit(MakeEvent(kT0, 1, keys_[1]), 10);
  std::vector<v1::Event> sent = stream_->TakeHeld();
  ASSERT_EQ(sent.size(), 2u);
  Ok(Find(sent, kT0, 1));  // finished, but @0 still holds the commit
  absl::StatusOr<std::string> outcome = engine_->SkipOffset(kT0, 1);
  ASSERT_FALSE(outcome.ok());
  EXPECT_EQ(outcome.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(outcome.status().message()), HasSubstr("lowest unfinished offset is 0"));
  // It is finished: the message must not send the operator looking for it
  // in a queue.
  EXPECT_THAT(std::string(outcome.status().message()), Not(HasSubstr("still queued")));
  EXPECT_THAT(stream_->cancelled(), IsEmpty());
  EXPECT_EQ(engine_->Snapshot().counters.skipped, 0);
}

}  // namespace
}  // namespace ferry::testing
