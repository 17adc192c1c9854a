#include "core/engine/dispatcher.h"

#include <vector>

#include "core/engine/queued_event_testing.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/mocks/engine_fixtures.h"
#include "tests/mocks/fake_worker_stream.h"

namespace ferry {
namespace {

using ::ferry::testing::EngineTestConfig;
using ::ferry::testing::FakeWorkerStream;
using ::ferry::testing::Offsets;
using ::ferry::testing::Queued;
using ::testing::ElementsAre;

const TopicPartition kP0{"t", 0};
const absl::Time kNow = absl::FromUnixSeconds(1000);

class DispatcherTest : public ::testing::Test {
 protected:
  int64_t Connect(FakeWorkerStream& stream, int64_t credit) {
    const int64_t id = streams_.Add(0, &stream);
    StreamTable::Entry& entry = *streams_.Find(id);
    entry.ready = true;
    entry.credit = credit;
    return id;
  }
  void EnqueueUnordered(int64_t from, int64_t to) {
    for (int64_t offset = from; offset < to; ++offset) queues_.Enqueue(Queued(kP0, offset), false);
  }
  void Run() {
    dispatcher_.Run({queues_, scheduler_, streams_, in_flight_, outbox_, counters_, guards_}, kNow);
    std::vector<Outbox::Outgoing> round;
    outbox_.TakeAll(round);
    for (Outbox::Outgoing& out : round) out.Send();
  }

  Config config_ = EngineTestConfig();
  SchedulingPlan plan_{config_};
  WorkQueues queues_{config_, plan_};
  Scheduler scheduler_{plan_, 1};
  StreamTable streams_{1};
  InFlightTable in_flight_;
  Outbox outbox_;
  EngineCounters counters_;
  DownstreamGuards guards_{config_, kNow};
  Dispatcher dispatcher_{config_, plan_.flow_count(), nullptr};
};

TEST_F(DispatcherTest, NeverSendsMoreThanTheCreditAndSpreadsRoundRobin) {
  FakeWorkerStream a("a"), b("b");
  const int64_t ia = Connect(a, 2);
  Connect(b, 2);
  EnqueueUnordered(0, 6);
  Run();
  EXPECT_THAT(Offsets(a.held()), ElementsAre(0, 2));
  EXPECT_THAT(Offsets(b.held()), ElementsAre(1, 3));
  EXPECT_EQ(counters_.dispatched, 4);
  EXPECT_EQ(in_flight_.size(), 4);
  EXPECT_EQ(streams_.Find(ia)->credit, 0);
  EXPECT_EQ(streams_.Find(ia)->in_flight, 2);
  EXPECT_TRUE(queues_.HasWork(0, 0));  // two wait for credit
}

TEST_F(DispatcherTest, BatchesAreBoundedByMaxBatchAndTheProcessorCap) {
  config_.processors[0].max_batch = 3;
  config_.processors[0].max_in_flight = 5;
  FakeWorkerStream a("a");
  Connect(a, 100);
  EnqueueUnordered(0, 20);
  Run();
  ASSERT_EQ(a.batches().size(), 2u);
  EXPECT_EQ(a.batches()[0].events_size(), 3);
  EXPECT_EQ(a.batches()[1].events_size(), 2);  // the cap of 5 in flight
}

TEST_F(DispatcherTest, BatchesAreBoundedByMaxBatchBytes) {
  FakeWorkerStream a("a");
  Connect(a, 100);
  for (int64_t offset = 0; offset < 4; ++offset) {
    QueuedEvent queued = Queued(kP0, offset);
    queued.event->set_payload(std::string(400, 'x'));
    queues_.Enqueue(std::move(queued), false);
  }
  config_.processors[0].max_batch_bytes = 1000;
  Run();
  ASSERT_EQ(a.batches().size(), 2u);
  EXPECT_EQ(a.batches()[0].events_size(), 2);
}

TEST_F(DispatcherTest, AnEventWithAStrikeTravelsAlone) {
  FakeWorkerStream a("a");
  Connect(a, 100);
  EnqueueUnordered(0, 1);
  QueuedEvent suspect = Queued(kP0, 1);
  suspect.strikes = 1;
  queues_.Enqueue(std::move(suspect), false);
  EnqueueUnordered(2, 3);
  Run();
  ASSERT_EQ(a.batches().size(), 3u);
  EXPECT_THAT(a.alone(), ElementsAre(false, true, false));
}

TEST_F(DispatcherTest, QuarantinedEventsWaitForAnIdleStreamOfTheirOwn) {
  FakeWorkerStream busy("busy");
  const int64_t ib = Connect(busy, 100);
  EnqueueUnordered(0, 1);
  Run();
  ASSERT_EQ(busy.held().size(), 1u);

  QueuedEvent quarantined = Queued(kP0, 7);
  quarantined.strikes = 2;
  queues_.Quarantine(std::move(quarantined));
  EnqueueUnordered(1, 2);
  Run();
  // No idle stream: the busy one is reserved (gets nothing new) to drain.
  EXPECT_TRUE(streams_.Find(ib)->reserved);
  EXPECT_EQ(busy.held().size(), 1u);

  FakeWorkerStream idle("idle");
  const int64_t ii = Connect(idle, 100);
  Run();
  ASSERT_EQ(idle.batches().size(), 1u);
  EXPECT_THAT(Offsets(idle.held()), ElementsAre(7));
  EXPECT_THAT(idle.alone(), ElementsAre(true));
  // It holds the quarantined event: nothing else goes to it; the reserved
  // stream is not used either until it drains.
  EXPECT_NE(streams_.Find(ii)->quarantined_id, 0u);
  EXPECT_EQ(idle.held().size(), 1u);
  EXPECT_TRUE(queues_.HasWork(0, 0));
}

}  // namespace
}  // namespace ferry
