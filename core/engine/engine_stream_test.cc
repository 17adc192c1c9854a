// The Engine and misbehaving or lost worker streams: protocol errors reset a
// stream and redeliver its events; redeliveries are bounded (core/engine/redelivery.h);
// strings a worker sends are bounded and sanitized (core/common/worker_text.h).
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/engine/engine.h"
#include "core/engine/redelivery.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/mocks/engine_fixtures.h"

namespace ferry::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

// The base engine test config with the ProcessorConfig default backoff ceiling
// (30s) this file's retry timings were written against.
Config TestConfig(FailurePolicy policy = FailurePolicy::kSkip) {
  Config config = EngineTestConfig(policy);
  config.processors[0].retry_backoff_max = absl::Seconds(30);
  return config;
}

class EngineStreamTest : public ::testing::Test, public EngineHarness {
 protected:
  void Start(FailurePolicy policy = FailurePolicy::kSkip) {
    EngineHarness::Start(TestConfig(policy), {{"t", 0}, {"t", 1}, {"t", 2}});
    engine_->SetStreamResetter([this](WorkerStream* s) { resets_.push_back(s); });
  }

  std::vector<WorkerStream*> resets_;
};

TEST_F(EngineStreamTest, ResultsOrCreditBeforeReadyAndUnknownStatusResetTheStream) {
  Start();
  // README: Results or Credit before Ready reset the stream; what such a
  // stream sends afterwards (even a Ready) is ignored and it gets no event.
  FakeWorkerStream early_results("early_results");
  FakeWorkerStream early_credit("early_credit");
  const int64_t early_results_id = engine_->AddStream(0, &early_results);
  engine_->OnResults(early_results_id, ResultFor(1, v1::Result::OK));
  engine_->OnReady(early_results_id, 10);
  const int64_t early_credit_id = engine_->AddStream(0, &early_credit);
  engine_->OnCredit(early_credit_id, 5);
  engine_->OnCredit(early_credit_id, 5);
  engine_->OnReady(early_credit_id, 10);
  EXPECT_EQ(engine_->Snapshot().counters.protocol_errors, 2);
  EXPECT_THAT(resets_, ElementsAre(&early_results, &early_credit));
  FakeWorkerStream stream("s");
  const int64_t id = Connect(*engine_, stream, 10);
  engine_->OnReady(id, 10);  // Ready twice: counted and ignored
  EXPECT_EQ(engine_->Snapshot().counters.protocol_errors, 3);
  engine_->Submit(MakeEvent(0, 0, "a"), 1);
  EXPECT_THAT(early_results.held(), IsEmpty());
  EXPECT_THAT(early_credit.held(), IsEmpty());
  const uint64_t event_id = stream.TakeHeld()[0].id();
  engine_->OnResults(id, ResultFor(event_id, static_cast<v1::Result::Status>(42)));
  EXPECT_EQ(engine_->Snapshot().counters.protocol_errors, 4);
  EXPECT_THAT(resets_, ElementsAre(&early_results, &early_credit, &stream));
  // The event is not lost: it goes to the next stream, as a redelivery.
  engine_->OnStreamClosed(id);
  FakeWorkerStream next("next");
  Connect(*engine_, next, 10);
  std::vector<v1::Event> redelivered = next.TakeHeld();
  ASSERT_EQ(redelivered.size(), 1u);
  EXPECT_EQ(redelivered[0].offset(), 0);
  EXPECT_EQ(redelivered[0].attempt(), 1);
  EXPECT_EQ(engine_->Buffered(), 1);
}

// What the WorkerPool reports when a worker's bytes do not parse.
TEST_F(EngineStreamTest, UnparsableMessageRedeliversAndNothingMoreIsSentToTheStream) {
  Start();
  FakeWorkerStream bad("bad");
  FakeWorkerStream good("good");
  const int64_t bad_id = Connect(*engine_, bad, 100);
  engine_->Submit(MakeEvent(0, 0, "a"), 1);
  engine_->Submit(MakeEvent(1, 0, "b"), 1);
  ASSERT_THAT(Offsets(bad.held()), ElementsAre(0, 0));
  const int64_t good_id = Connect(*engine_, good, 100);
  engine_->OnProtocolError(bad_id, "a message of 5 bytes that is not a ProcessResponse");
  EXPECT_EQ(engine_->Snapshot().counters.protocol_errors, 1);
  EXPECT_EQ(engine_->Snapshot().counters.redelivered, 2);
  EXPECT_THAT(resets_, ElementsAre(&bad));
  // Its events went to the good stream at once; new ones go there too.
  EXPECT_EQ(good.held().size(), 2u);
  engine_->Submit(MakeEvent(2, 0, "c"), 1);
  EXPECT_EQ(good.held().size(), 3u);
  EXPECT_EQ(bad.held().size(), 2u);  // nothing more after the error
  // Late traffic of the reset stream is ignored (not counted again), and its
  // close redelivers nothing twice.
  engine_->OnCredit(bad_id, 10);
  engine_->OnResults(bad_id, ResultFor(bad.held()[0].id(), v1::Result::OK));
  engine_->OnProtocolError(bad_id, "again");
  engine_->OnStreamClosed(bad_id);
  EXPECT_EQ(engine_->Snapshot().counters.protocol_errors, 1);
  EXPECT_EQ(engine_->Snapshot().counters.redelivered, 2);
  EXPECT_EQ(engine_->Snapshot().counters.acked, 0);
  AckAll(*engine_, good_id, good);
  EXPECT_EQ(engine_->Snapshot().counters.acked, 3);
  EXPECT_EQ(CommitOffset(*engine_, 0), 1);
  EXPECT_EQ(CommitOffset(*engine_, 1), 1);
  EXPECT_EQ(CommitOffset(*engine_, 2), 1);
}

const v1::Event* FindKey(const std::vector<v1::Event>& events, const std::string& key) {
  for (const v1::Event& event : events) {
    if (event.key() == key) return &event;
  }
  return nullptr;
}

TEST_F(EngineStreamTest, RedeliveredEventsTravelAloneAndBystandersAreNotCharged) {
  Start();
  FakeWorkerStream first("first");
  const int64_t first_id = Connect(*engine_, first, 100);
  engine_->Submit(MakeEvent(0, 0, "a"), 1);
  engine_->Submit(MakeEvent(1, 0, "b"), 1);
  engine_->OnStreamClosed(first_id, "stream ended: boom (code 13)");
  // Both were lost once: each now goes in a message of its own.
  FakeWorkerStream second("second");
  const int64_t second_id = Connect(*engine_, second, 100);
  ASSERT_EQ(second.batches().size(), 2u);
  EXPECT_THAT(second.alone(), ElementsAre(true, true));
  EXPECT_EQ(second.batches()[0].events_size(), 1);
  EXPECT_EQ(second.batches()[1].events_size(), 1);
  // b finishes; a fresh event c joins a on the stream, then the stream is
  // lost: only a (a suspect) is charged, c is redelivered without a strike.
  const std::vector<v1::Event> suspects = second.TakeHeld();
  ASSERT_NE(FindKey(suspects, "b"), nullptr);
  engine_->OnResults(second_id, ResultFor(FindKey(suspects, "b")->id(), v1::Result::OK));
  engine_->Submit(MakeEvent(2, 0, "c"), 1);
  ASSERT_THAT(second.alone(), ElementsAre(true, true, false));
  engine_->OnStreamClosed(second_id);
  // a, lost twice, is quarantined: alone on its stream, which gets nothing
  // else until a's result; then c and d travel together, in one batch.
  FakeWorkerStream third("third");
  const int64_t third_id = engine_->AddStream(0, &third);
  engine_->Submit(MakeEvent(2, 1, "d"), 1);
  engine_->OnReady(third_id, 100);
  ASSERT_EQ(third.batches().size(), 1u);
  EXPECT_THAT(third.alone(), ElementsAre(true));
  ASSERT_EQ(third.held().size(), 1u);
  EXPECT_EQ(third.held()[0].key(), "a");
  engine_->OnResults(third_id, ResultFor(third.TakeHeld()[0].id(), v1::Result::OK));
  ASSERT_EQ(third.batches().size(), 2u);
  EXPECT_THAT(third.alone(), ElementsAre(true, false));
  EXPECT_EQ(third.batches()[1].events_size(), 2);  // c (redelivered, uncharged) and d
  AckAll(*engine_, third_id, third);
  EXPECT_EQ(CommitOffset(*engine_, 0), 1);
  EXPECT_EQ(CommitOffset(*engine_, 1), 1);
  EXPECT_EQ(CommitOffset(*engine_, 2), 2);
}

// With no idle stream, one stream is drained for a quarantined event: fresh
// work goes to the others meanwhile, so the event is never starved.
TEST_F(EngineStreamTest, AStreamIsDrainedForAQuarantinedEvent) {
  Start();
  // y and w are busy, with no credit left.
  FakeWorkerStream y("y");
  FakeWorkerStream w("w");
  const int64_t y_id = Connect(*engine_, y, 2);
  const int64_t w_id = Connect(*engine_, w, 2);
  std::vector<Engine::SubmitItem> items(4);
  for (int i = 0; i < 4; ++i) {
    items[i] = SubmitItemOf(MakeEvent(1, i, "k" + std::to_string(i)), 1);
  }
  engine_->SubmitBatch(items);
  ASSERT_EQ(y.held().size(), 2u);
  ASSERT_EQ(w.held().size(), 2u);
  // q loses its stream twice and is quarantined: no stream is idle.
  engine_->Submit(MakeEvent(0, 0, "q"), 1);
  for (int loss = 0; loss < kQuarantineStrikes; ++loss) {
    FakeWorkerStream lost("lost");
    const int64_t id = Connect(*engine_, lost, 100);
    ASSERT_EQ(lost.held().size(), 1u);
    engine_->OnStreamClosed(id);
  }
  // One of them (y, the first with the fewest in flight) is drained for q:
  // given credit, it gets no fresh event; w does.
  engine_->OnCredit(y_id, 10);
  engine_->OnCredit(w_id, 10);
  engine_->Submit(MakeEvent(2, 0, "f"), 1);
  EXPECT_EQ(y.held().size(), 2u);
  ASSERT_EQ(w.held().size(), 3u);
  EXPECT_EQ(w.held()[2].key(), "f");
  // Once y is idle, q goes there, alone.
  AckAll(*engine_, y_id, y);
  ASSERT_EQ(y.held().size(), 1u);
  EXPECT_EQ(y.held()[0].key(), "q");
  EXPECT_TRUE(y.alone().back());
  AckAll(*engine_, y_id, y);
  AckAll(*engine_, w_id, w);
  EXPECT_EQ(CommitOffset(*engine_, 0), 1);
  EXPECT_EQ(CommitOffset(*engine_, 1), 4);
  EXPECT_EQ(CommitOffset(*engine_, 2), 1);
}

// A message every worker rejects (its stream ends each time it carries the
// event) no longer loops forever: after kMaxRedeliveries redeliveries the
// event takes the failure policy, and the events that shared its first
// batch are processed and committed.
TEST_F(EngineStreamTest, EventWhoseStreamKeepsBeingLostTakesTheFailurePolicy) {
  Start(FailurePolicy::kDeadLetter);
  engine_->Submit(MakeEvent(0, 0, "poison"), 1);
  engine_->Submit(MakeEvent(1, 0, "b"), 1);
  engine_->Submit(MakeEvent(2, 0, "c"), 1);
  engine_->Submit(MakeEvent(0, 1, "d"), 1);
  int poison_dispatches = 0;
  for (int round = 0; round < 100; ++round) {
    FakeWorkerStream stream("s" + std::to_string(round));
    const int64_t id = Connect(*engine_, stream, 100);
    bool lost = false;
    while (!stream.held().empty() && !lost) {
      // Everything in flight on the stream is lost with it.
      const std::vector<v1::Event> held = stream.TakeHeld();
      if (FindKey(held, "poison") != nullptr) {
        ++poison_dispatches;
        engine_->OnStreamClosed(id, "stream ended: failed to parse request (code 13)");
        lost = true;
        break;
      }
      for (const v1::Event& event : held) {
        engine_->OnResults(id, ResultFor(event.id(), v1::Result::OK));
      }
    }
    if (!lost) {
      engine_->OnStreamClosed(id);
      break;
    }
  }
  EXPECT_EQ(poison_dispatches, kMaxRedeliveries + 1);
  EXPECT_EQ(engine_->Snapshot().counters.redelivery_limit, 1);
  EXPECT_EQ(engine_->Snapshot().counters.failed, 1);
  EXPECT_EQ(engine_->Snapshot().counters.acked, 3);
  ASSERT_EQ(writer_.written().size(), 1u);
  const DeadLetter& letter = writer_.written()[0];
  EXPECT_EQ(letter.source_partition, 0);
  EXPECT_EQ(letter.source_offset, 0);
  EXPECT_THAT(letter.error, HasSubstr("redelivery limit"));
  EXPECT_THAT(letter.error, HasSubstr("failed to parse request"));
  EXPECT_EQ(CommitOffset(*engine_, 1), 1);
  EXPECT_EQ(CommitOffset(*engine_, 2), 1);
  EXPECT_EQ(CommitOffset(*engine_, 0), std::nullopt);  // done once the dead letter is acknowledged
  writer_.Complete();
  EXPECT_EQ(CommitOffset(*engine_, 0), 2);
  EXPECT_EQ(engine_->Buffered(), 0);
}

// Legitimate losses (a crashing worker) keep being redelivered up to the
// bound: an event lost kMaxRedeliveries times is still processed.
TEST_F(EngineStreamTest, UpToTheBoundLostStreamsAreRedeliveries) {
  Start();
  engine_->Submit(MakeEvent(0, 0, "a"), 1);
  for (int loss = 0; loss < kMaxRedeliveries; ++loss) {
    FakeWorkerStream crashing("crashing");
    const int64_t id = Connect(*engine_, crashing, 100);
    ASSERT_EQ(crashing.held().size(), 1u) << loss;
    engine_->OnStreamClosed(id);
  }
  FakeWorkerStream healthy("healthy");
  const int64_t id = Connect(*engine_, healthy, 100);
  ASSERT_EQ(healthy.held().size(), 1u);
  AckAll(*engine_, id, healthy);
  EXPECT_EQ(engine_->Snapshot().counters.redelivered, kMaxRedeliveries);
  EXPECT_EQ(engine_->Snapshot().counters.redelivery_limit, 0);
  EXPECT_EQ(CommitOffset(*engine_, 0), 1);
}

TEST_F(EngineStreamTest, BlockPolicyHoldsThePartitionAtTheRedeliveryLimit) {
  Start(FailurePolicy::kBlock);
  engine_->Submit(MakeEvent(0, 0, "a"), 1);
  engine_->Submit(MakeEvent(0, 1, "a"), 1);
  for (int loss = 0; loss <= kMaxRedeliveries; ++loss) {
    FakeWorkerStream stream("s");
    const int64_t id = Connect(*engine_, stream, 100);
    ASSERT_THAT(Offsets(stream.held()), ElementsAre(0)) << loss;
    engine_->OnStreamClosed(id);
  }
  FakeWorkerStream stream("after");
  Connect(*engine_, stream, 100);
  EXPECT_THAT(stream.held(), IsEmpty());  // the key's next event waits
  EXPECT_EQ(engine_->BlockedPartitions().size(), 1u);
  EXPECT_EQ(engine_->Snapshot().counters.redelivery_limit, 1);
}

TEST_F(EngineStreamTest, QuarantinedEventsAreDroppedOnRevokeAndCanBeSkipped) {
  Start();
  // a and b are lost twice with their stream: both are quarantined.
  engine_->Submit(MakeEvent(0, 0, "a"), 1);
  engine_->Submit(MakeEvent(1, 0, "b"), 1);
  for (int loss = 0; loss < kQuarantineStrikes; ++loss) {
    FakeWorkerStream lost("lost");
    const int64_t id = Connect(*engine_, lost, 100);
    ASSERT_EQ(lost.held().size(), 2u);
    engine_->OnStreamClosed(id);
  }
  engine_->Submit(MakeEvent(1, 1, "b"), 1);  // waits behind b: its lane is busy
  EXPECT_EQ(engine_->Buffered(), 3);
  EXPECT_EQ(engine_->Snapshot().queued_events, 3);
  // Skip takes a quarantined event (no dead-letter topic: marked done) and
  // releases its lane; revoke drops the other.
  absl::StatusOr<std::string> skipped = engine_->SkipOffset({"t", 1}, 0);
  ASSERT_TRUE(skipped.ok()) << skipped.status();
  EXPECT_EQ(*skipped, "marked_done");
  engine_->OnRevoked({{"t", 0}});
  EXPECT_EQ(engine_->Buffered(), 1);
  FakeWorkerStream stream("s");
  const int64_t id = Connect(*engine_, stream, 100);
  ASSERT_EQ(stream.held().size(), 1u);
  EXPECT_EQ(stream.held()[0].offset(), 1);
  EXPECT_EQ(stream.held()[0].partition(), 1);
  AckAll(*engine_, id, stream);
  EXPECT_EQ(CommitOffset(*engine_, 1), 2);
  EXPECT_EQ(engine_->Buffered(), 0);
}

TEST_F(EngineStreamTest, WorkerNamesAndMessagesAreBoundedAndSanitized) {
  Start(FailurePolicy::kDeadLetter);
  FakeWorkerStream stream("s");
  const int64_t id = engine_->AddStream(0, &stream);
  const std::string forged = "\n2026-01-01T00:00:00.000Z ERROR forged";
  engine_->OnReady(id, 100, std::string(10 << 20, 'w') + forged);
  const EngineSnapshot snapshot = engine_->Snapshot();
  ASSERT_EQ(snapshot.streams.size(), 1u);
  EXPECT_LE(snapshot.streams[0].worker_name.size(), 256u + 32u);
  EXPECT_THAT(snapshot.streams[0].worker_name, Not(HasSubstr("\n")));
  EXPECT_THAT(snapshot.streams[0].worker_name, HasSubstr("bytes truncated"));
  engine_->Submit(MakeEvent(0, 0, "a"), 1);
  const uint64_t event_id = stream.TakeHeld()[0].id();
  engine_->OnResults(id, ResultFor(event_id, v1::Result::FAIL,
                                   "bad\r\n" + std::string(5 << 20, 'm') + "\x1b[2J"));
  ASSERT_EQ(writer_.written().size(), 1u);
  const std::string& error = writer_.written()[0].error;
  EXPECT_LE(error.size(), 1024u + 32u);
  EXPECT_THAT(error, HasSubstr("bad\\x0d\\x0a"));
  EXPECT_THAT(error, Not(HasSubstr("\n")));
}

}  // namespace
}  // namespace ferry::testing
