// The Engine with workers that take runs (Ready.max_run > 1; see "Runs" in
// proto/ferry/v1/processor.proto and core/engine/runs.h), with a fake clock
// and fake worker streams: how runs are formed, and what RETRY, FAIL,
// NOT_ATTEMPTED, a timeout and a lost stream do to a run's members.
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/engine/engine.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/mocks/engine_fixtures.h"

namespace ferry::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::UnorderedElementsAre;

constexpr auto kOk = v1::Result::OK;
constexpr auto kRetry = v1::Result::RETRY;
constexpr auto kFail = v1::Result::FAIL;
constexpr auto kNotAttempted = v1::Result::NOT_ATTEMPTED;

class EngineRunsTest : public ::testing::Test, public EngineHarness {
 protected:
  EngineRunsTest() : EngineHarness(EngineTestConfig(), TwoPartitions(), DeadLetters::kNone) {}

  // Offsets first..first+count-1 of partition 0 with key `key`, submitted as
  // one consume batch (one dispatch after all of them).
  void SubmitKeyed(int64_t first, int count, const std::string& key = "a") {
    std::vector<Engine::SubmitItem> items;
    for (int64_t offset = first; offset < first + count; ++offset) {
      items.push_back(SubmitItemOf(MakeEvent(0, offset, key), 10));
    }
    engine_->SubmitBatch(items);
  }

  static std::vector<int> Attempts(const std::vector<v1::Event>& events) {
    std::vector<int> attempts;
    for (const v1::Event& event : events) attempts.push_back(event.attempt());
    return attempts;
  }
};

TEST_F(EngineRunsTest, LaneSendsARunInOneMessageAndStaysBusyUntilAllAnswered) {
  FakeWorkerStream stream("s");
  const int64_t id = Connect(*engine_, stream, 100, 0, /*max_run=*/4);
  SubmitKeyed(0, 6);
  ASSERT_EQ(stream.batches().size(), 1u);
  std::vector<v1::Event> run = stream.TakeHeld();
  EXPECT_THAT(Offsets(run), ElementsAre(0, 1, 2, 3));
  ASSERT_NE(run[0].run_id(), 0u);
  for (size_t k = 0; k < run.size(); ++k) {
    EXPECT_EQ(run[k].run_id(), run[0].run_id());
    // The k-th member (from 1) gets k timeouts from when the run was sent.
    EXPECT_EQ(run[k].deadline_ms() - run[0].deadline_ms(), static_cast<int64_t>(k) * 10000);
  }
  engine_->OnResults(id, ResultsFor({{run[0].id(), kOk}, {run[1].id(), kOk}, {run[2].id(), kOk}}));
  EXPECT_THAT(stream.held(), IsEmpty()) << "the lane is busy until the whole run is answered";
  EXPECT_EQ(CommitOffset(*engine_, 0), 3);
  engine_->OnResults(id, ResultFor(run[3].id(), kOk));
  std::vector<v1::Event> rest = stream.TakeHeld();
  EXPECT_THAT(Offsets(rest), ElementsAre(4, 5));
  EXPECT_NE(rest[0].run_id(), run[0].run_id());
  EXPECT_EQ(rest[1].run_id(), rest[0].run_id());
  const EngineCounters counters = engine_->Snapshot().counters;
  EXPECT_EQ(counters.runs, 2);
  EXPECT_EQ(counters.run_events, 6);
}

TEST_F(EngineRunsTest, WorkerWithoutMaxRunGetsOneEventOfALaneAtATime) {
  for (uint32_t max_run : {0u, 1u}) {
    Start(EngineTestConfig(), TwoPartitions(), DeadLetters::kNone);
    FakeWorkerStream stream("s");
    Connect(*engine_, stream, 100, 0, max_run);
    SubmitKeyed(0, 3);
    ASSERT_EQ(stream.held().size(), 1u) << "max_run " << max_run;
    EXPECT_EQ(stream.held()[0].run_id(), 0u);
    EXPECT_EQ(engine_->Snapshot().counters.runs, 0);
  }
}

TEST_F(EngineRunsTest, RunIsBoundedByCreditAndCap) {
  FakeWorkerStream stream("s");
  Connect(*engine_, stream, 3, 0, /*max_run=*/8);
  SubmitKeyed(0, 6);
  EXPECT_THAT(Offsets(stream.TakeHeld()), ElementsAre(0, 1, 2));

  Config config = EngineTestConfig();
  config.processors[0].max_in_flight = 2;
  Start(config, TwoPartitions(), DeadLetters::kNone);
  FakeWorkerStream capped("c");
  Connect(*engine_, capped, 100, 0, /*max_run=*/8);
  SubmitKeyed(0, 6);
  EXPECT_THAT(Offsets(capped.TakeHeld()), ElementsAre(0, 1));
}

TEST_F(EngineRunsTest, LanesOfDifferentKeysGetRunsOfTheirOwn) {
  FakeWorkerStream stream("s");
  Connect(*engine_, stream, 100, 0, /*max_run=*/8);
  std::vector<Engine::SubmitItem> items;
  for (int64_t offset = 0; offset < 6; ++offset) {
    items.push_back(SubmitItemOf(MakeEvent(0, offset, offset % 2 == 0 ? "a" : "b"), 10));
  }
  engine_->SubmitBatch(items);
  std::vector<v1::Event> sent = stream.TakeHeld();
  ASSERT_EQ(sent.size(), 6u);
  std::map<uint64_t, std::vector<int64_t>> by_run;
  for (const v1::Event& event : sent) by_run[event.run_id()].push_back(event.offset());
  EXPECT_EQ(by_run.count(0), 0u);
  std::set<std::vector<int64_t>> runs;
  for (const auto& [run_id, offsets] : by_run) runs.insert(offsets);
  EXPECT_THAT(runs, ElementsAre(ElementsAre(0, 2, 4), ElementsAre(1, 3, 5)));
}

TEST_F(EngineRunsTest, UnorderedTopicsNeverGetRuns) {
  Config config = EngineTestConfig();
  config.topics[0].ordering = Ordering::kUnordered;
  Start(config, TwoPartitions(), DeadLetters::kNone);
  FakeWorkerStream stream("s");
  Connect(*engine_, stream, 100, 0, /*max_run=*/8);
  SubmitKeyed(0, 5);
  std::vector<v1::Event> sent = stream.TakeHeld();
  ASSERT_EQ(sent.size(), 5u);
  for (const v1::Event& event : sent) EXPECT_EQ(event.run_id(), 0u);
  EXPECT_EQ(engine_->Snapshot().counters.runs, 0);
}

TEST_F(EngineRunsTest, RetryMidRunPutsNotAttemptedBackAfterItWithoutAnAttempt) {
  FakeWorkerStream stream("s");
  const int64_t id = Connect(*engine_, stream, 100, 0, /*max_run=*/4);
  SubmitKeyed(0, 6);
  std::vector<v1::Event> run = stream.TakeHeld();
  engine_->OnResults(id, ResultsFor({{run[0].id(), kOk},
                                     {run[1].id(), kRetry},
                                     {run[2].id(), kNotAttempted},
                                     {run[3].id(), kNotAttempted}}));
  EXPECT_THAT(stream.held(), IsEmpty()) << "the retry holds its lane while it backs off";
  clock_.Advance(absl::Seconds(1));
  engine_->OnTimer();
  std::vector<v1::Event> again = stream.TakeHeld();
  EXPECT_THAT(Offsets(again), ElementsAre(1, 2, 3, 4));
  EXPECT_THAT(Attempts(again), ElementsAre(2, 1, 1, 1));
  const EngineCounters counters = engine_->Snapshot().counters;
  EXPECT_EQ(counters.not_attempted, 2);
  EXPECT_EQ(counters.retried, 1);
  EXPECT_EQ(CommitOffset(*engine_, 0), 1);
}

TEST_F(EngineRunsTest, NotAttemptedInAnyOrderKeepsTheLaneOrder) {
  FakeWorkerStream stream("s");
  const int64_t id = Connect(*engine_, stream, 100, 0, /*max_run=*/5);
  SubmitKeyed(0, 5);
  std::vector<v1::Event> run = stream.TakeHeld();
  engine_->OnResults(id, ResultFor(run[4].id(), kNotAttempted));
  engine_->OnResults(id, ResultFor(run[2].id(), kNotAttempted));
  engine_->OnResults(id, ResultFor(run[3].id(), kNotAttempted));
  EXPECT_THAT(stream.held(), IsEmpty());
  engine_->OnResults(id, ResultFor(run[0].id(), kOk));
  engine_->OnResults(id, ResultFor(run[1].id(), kFail, "bad"));  // skipped by policy
  std::vector<v1::Event> again = stream.TakeHeld();
  EXPECT_THAT(Offsets(again), ElementsAre(2, 3, 4));
  EXPECT_THAT(Attempts(again), ElementsAre(1, 1, 1));
  EXPECT_EQ(engine_->Snapshot().counters.failed, 1);
  EXPECT_EQ(CommitOffset(*engine_, 0), 2);
  for (const v1::Event& event : again) engine_->OnResults(id, ResultFor(event.id(), kOk));
  EXPECT_EQ(CommitOffset(*engine_, 0), 5);
}

TEST_F(EngineRunsTest, NotAttemptedOfAFirstMemberOrASingleEventIsARetry) {
  FakeWorkerStream stream("s");
  const int64_t id = Connect(*engine_, stream, 100, 0, /*max_run=*/3);
  SubmitKeyed(0, 3);
  std::vector<v1::Event> run = stream.TakeHeld();
  engine_->OnResults(id, ResultsFor({{run[0].id(), kNotAttempted},
                                     {run[1].id(), kNotAttempted},
                                     {run[2].id(), kNotAttempted}}));
  EXPECT_EQ(engine_->Snapshot().counters.retried, 1);
  EXPECT_EQ(engine_->Snapshot().counters.not_attempted, 2);
  clock_.Advance(absl::Seconds(1));
  engine_->OnTimer();
  std::vector<v1::Event> again = stream.TakeHeld();
  EXPECT_THAT(Offsets(again), ElementsAre(0, 1, 2));
  EXPECT_THAT(Attempts(again), ElementsAre(2, 1, 1));

  Start(EngineTestConfig(), TwoPartitions(), DeadLetters::kNone);
  FakeWorkerStream plain("p");
  const int64_t plain_id = Connect(*engine_, plain, 100);
  engine_->Submit(MakeEvent(0, 0, "a"), 10);
  engine_->OnResults(plain_id, ResultFor(plain.TakeHeld()[0].id(), kNotAttempted));
  EXPECT_EQ(engine_->Snapshot().counters.retried, 1);
  EXPECT_EQ(engine_->Snapshot().counters.not_attempted, 0);
}

TEST_F(EngineRunsTest, TimeoutOfAMemberCancelsItAndTheLaterMembers) {
  FakeWorkerStream stream("s");
  const int64_t id = Connect(*engine_, stream, 100, 0, /*max_run=*/3);
  SubmitKeyed(0, 3);
  std::vector<v1::Event> run = stream.TakeHeld();
  engine_->OnResults(id, ResultFor(run[0].id(), kOk));
  clock_.Advance(absl::Seconds(11));
  engine_->OnTimer();  // the second member has two timeouts
  EXPECT_THAT(stream.cancelled(), IsEmpty());
  clock_.Advance(absl::Seconds(10));
  engine_->OnTimer();
  EXPECT_THAT(stream.cancelled(), UnorderedElementsAre(run[1].id(), run[2].id()));
  EngineCounters counters = engine_->Snapshot().counters;
  EXPECT_EQ(counters.timed_out, 1);
  EXPECT_EQ(counters.not_attempted, 1);
  // The timed-out member failed (skip policy); the cancelled one comes again
  // as attempt 1, and the worker's late answer for it is stale.
  std::vector<v1::Event> again = stream.TakeHeld();
  EXPECT_THAT(Offsets(again), ElementsAre(2));
  EXPECT_THAT(Attempts(again), ElementsAre(1));
  engine_->OnResults(id, ResultFor(run[2].id(), kNotAttempted));
  EXPECT_EQ(engine_->Snapshot().counters.stale_results, 1);
  engine_->OnResults(id, ResultFor(again[0].id(), kOk));
  EXPECT_EQ(CommitOffset(*engine_, 0), 3);
}

TEST_F(EngineRunsTest, MembersExpiredTogetherCountOneTimeout) {
  FakeWorkerStream stream("s");
  Connect(*engine_, stream, 100, 0, /*max_run=*/3);
  SubmitKeyed(0, 3);
  std::vector<v1::Event> run = stream.TakeHeld();
  clock_.Advance(absl::Seconds(40));  // every member's deadline passed
  engine_->OnTimer();
  EXPECT_THAT(stream.cancelled(), UnorderedElementsAre(run[0].id(), run[1].id(), run[2].id()));
  const EngineCounters counters = engine_->Snapshot().counters;
  EXPECT_EQ(counters.timed_out, 1);
  EXPECT_EQ(counters.not_attempted, 2);
  EXPECT_THAT(Offsets(stream.TakeHeld()), ElementsAre(1, 2));
}

TEST_F(EngineRunsTest, LostStreamRedeliversUnansweredMembersInOrder) {
  FakeWorkerStream lost("lost");
  const int64_t lost_id = Connect(*engine_, lost, 100, 0, /*max_run=*/4);
  SubmitKeyed(0, 4);
  std::vector<v1::Event> run = lost.TakeHeld();
  engine_->OnResults(lost_id, ResultsFor({{run[0].id(), kOk}, {run[1].id(), kRetry},
                                          {run[2].id(), kNotAttempted}}));
  engine_->OnStreamClosed(lost_id, "gone");
  FakeWorkerStream next("next");
  const int64_t next_id = Connect(*engine_, next, 100, 0, /*max_run=*/4);
  clock_.Advance(absl::Seconds(1));
  engine_->OnTimer();
  // The retry first, then the member given back, then the one redelivered
  // (alone: it was on a lost stream).
  std::vector<int64_t> order;
  for (int round = 0; round < 5 && order.size() < 3; ++round) {
    std::vector<v1::Event> sent = next.TakeHeld();
    for (const v1::Event& event : sent) {
      order.push_back(event.offset());
      engine_->OnResults(next_id, ResultFor(event.id(), kOk));
    }
  }
  EXPECT_THAT(order, ElementsAre(1, 2, 3));
  EXPECT_EQ(CommitOffset(*engine_, 0), 4);
  EXPECT_EQ(engine_->Snapshot().counters.redelivered, 1);
}

}  // namespace
}  // namespace ferry::testing
