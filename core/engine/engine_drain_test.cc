// The engine's side of the shutdown drain (issue 20, item 4): once
// StopDispatching is called nothing leaves for a worker any more — queued
// events, a RETRY's next attempt, a redelivery — and Drainable() counts only
// what can still finish: events at a worker and dead letters being written.
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/engine/engine.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/mocks/engine_fixtures.h"

namespace ferry::testing {
namespace {

using ::testing::IsEmpty;
using ::testing::SizeIs;

class DrainTest : public ::testing::Test, public EngineHarness {
 protected:
  DrainTest() : EngineHarness(EngineTestConfig(FailurePolicy::kDeadLetter), {{"t", 0}}) {}
  FakeWorkerStream stream_{"s"};
  const int64_t stream_id_ = Connect(*engine_, stream_, 100);
};

TEST_F(DrainTest, QueuedEventsAreNeitherDispatchedNorWaitedFor) {
  // One key: the first is in flight, the next two wait in its lane.
  for (int64_t offset = 0; offset < 3; ++offset) engine_->Submit(MakeEvent(0, offset, "k"), 1);
  std::vector<v1::Event> sent = stream_.TakeHeld();
  ASSERT_THAT(sent, SizeIs(1));
  engine_->StopDispatching();
  EXPECT_EQ(engine_->Drainable(), 1);  // only the one at the worker
  EXPECT_EQ(engine_->Buffered(), 3);

  engine_->OnResults(stream_id_, ResultFor(sent[0].id(), v1::Result::OK));
  EXPECT_THAT(stream_.held(), IsEmpty()) << "the lane's next event must not leave";
  EXPECT_EQ(engine_->Drainable(), 0);
  EXPECT_EQ(CommitOffset(*engine_), 1);  // exactly what the worker finished
}

TEST_F(DrainTest, ARetryDuringTheDrainIsNotSentAgain) {
  engine_->Submit(MakeEvent(0, 0, "k"), 1);
  std::vector<v1::Event> sent = stream_.TakeHeld();
  ASSERT_THAT(sent, SizeIs(1));
  engine_->StopDispatching();
  engine_->OnResults(stream_id_, ResultFor(sent[0].id(), v1::Result::RETRY));
  EXPECT_EQ(engine_->Drainable(), 0) << "a retry waits for the next owner, not for the drain";
  clock_.Advance(absl::Seconds(5));  // well past the backoff
  engine_->OnTimer();
  EXPECT_THAT(stream_.held(), IsEmpty());
  EXPECT_EQ(CommitOffset(*engine_), std::nullopt) << "an unfinished event must not be committed";
  EXPECT_EQ(engine_->Buffered(), 1);
}

TEST_F(DrainTest, ALostStreamsEventsAreNotRedeliveredDuringTheDrain) {
  engine_->Submit(MakeEvent(0, 0, "k"), 1);
  ASSERT_THAT(stream_.TakeHeld(), SizeIs(1));
  FakeWorkerStream other("other");
  engine_->OnReady(engine_->AddStream(0, &other), 100);
  engine_->StopDispatching();
  engine_->OnStreamClosed(stream_id_);
  EXPECT_THAT(other.held(), IsEmpty()) << "a redelivery is a new dispatch";
  EXPECT_EQ(engine_->Drainable(), 0);
  EXPECT_EQ(CommitOffset(*engine_), std::nullopt);
}

TEST_F(DrainTest, ADeadLetterBeingWrittenIsWaitedFor) {
  engine_->Submit(MakeEvent(0, 0, "k"), 1);
  std::vector<v1::Event> sent = stream_.TakeHeld();
  ASSERT_THAT(sent, SizeIs(1));
  engine_->StopDispatching();
  engine_->OnResults(stream_id_, ResultFor(sent[0].id(), v1::Result::FAIL));
  ASSERT_EQ(writer_.pending(), 1u);
  EXPECT_EQ(engine_->Drainable(), 1) << "the dead letter decides whether the offset commits";
  writer_.Complete();
  EXPECT_EQ(engine_->Drainable(), 0);
  EXPECT_EQ(CommitOffset(*engine_), 1);
}

}  // namespace
}  // namespace ferry::testing
