// The Engine with downstream protection on (core/engine/downstream_guard.h),
// with a fake clock and fake worker streams: a rate limit holds dispatch to
// its bucket and an operator can change it, adaptive concurrency caps what is
// in flight, and an open circuit breaker stops dispatch, spares failures (no
// attempt, no dead letter) and probes before it closes.
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/engine/engine.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/mocks/engine_fixtures.h"

namespace ferry::testing {
namespace {

using ::testing::IsEmpty;
using ::testing::SizeIs;

class EngineGuardTest : public ::testing::Test, public EngineHarness {
 protected:
  // Events 0..n-1 of partition 0, each of its own key (no lane waits on
  // another).
  void SubmitDistinct(int64_t from, int64_t to) {
    for (int64_t offset = from; offset < to; ++offset) {
      engine_->Submit(MakeEvent(0, offset, absl::StrCat("k", offset)), 10);
    }
  }
  // Advances the clock by `step`, `steps` times, running the timer each time.
  void Tick(absl::Duration step, int steps = 1) {
    for (int i = 0; i < steps; ++i) {
      clock_.Advance(step);
      engine_->OnTimer();
    }
  }
  ProcessorSnapshot Processor() { return engine_->Snapshot().processors.at(0); }
};

TEST_F(EngineGuardTest, RateLimitSendsNoMoreThanTheBucketAllows) {
  Config config = EngineTestConfig();
  config.processors[0].rate_limit = {10, 2};  // 10 events/s, burst 2
  Start(config);
  FakeWorkerStream stream("s");
  const int64_t id = Connect(*engine_, stream, 100);
  SubmitDistinct(0, 30);
  EXPECT_THAT(stream.held(), SizeIs(2));  // the full bucket
  AckAll(*engine_, id, stream);
  // One token per 100 ms; acking frees credit but not tokens.
  Tick(absl::Milliseconds(50));
  EXPECT_THAT(stream.held(), IsEmpty());
  Tick(absl::Milliseconds(50));
  EXPECT_THAT(stream.held(), SizeIs(1));
  int sent = 3;
  for (int i = 0; i < 10; ++i) {
    AckAll(*engine_, id, stream);
    Tick(absl::Milliseconds(100));
    sent += static_cast<int>(stream.held().size());
  }
  EXPECT_EQ(sent, 13);  // 2 + 1 s at 10/s + the first 100 ms
  const ProcessorSnapshot p = Processor();
  EXPECT_EQ(p.rate_limit_eps, 10);
  EXPECT_EQ(p.rate_limit_burst, 2);
  EXPECT_FALSE(p.rate_limit_overridden);
}

TEST_F(EngineGuardTest, OperatorRateLimitOverridesAndClears) {
  Start(EngineTestConfig());
  FakeWorkerStream stream("s");
  const int64_t id = Connect(*engine_, stream, 100);
  engine_->SetRateLimits({{"p", RateLimitConfig{1, 1}}, {"no-such-processor", {5, 5}}});
  SubmitDistinct(0, 5);
  EXPECT_THAT(stream.held(), SizeIs(1));
  ProcessorSnapshot p = Processor();
  EXPECT_EQ(p.rate_limit_eps, 1);
  EXPECT_TRUE(p.rate_limit_overridden);
  AckAll(*engine_, id, stream);
  // Back to the configured (no) limit: the rest goes at once.
  engine_->SetRateLimits({});
  EXPECT_THAT(stream.held(), SizeIs(4));
  p = Processor();
  EXPECT_EQ(p.rate_limit_eps, 0);
  EXPECT_FALSE(p.rate_limit_overridden);
}

TEST_F(EngineGuardTest, OperatorCanLiftAConfiguredLimit) {
  Config config = EngineTestConfig();
  config.processors[0].rate_limit = {1, 1};
  Start(config);
  FakeWorkerStream stream("s");
  Connect(*engine_, stream, 100);
  SubmitDistinct(0, 5);
  EXPECT_THAT(stream.held(), SizeIs(1));
  engine_->SetRateLimits({{"p", RateLimitConfig{0, 0}}});
  EXPECT_THAT(stream.held(), SizeIs(5));
  EXPECT_TRUE(Processor().rate_limit_overridden);
}

TEST_F(EngineGuardTest, AdaptiveConcurrencyCapsWhatIsInFlight) {
  Config config = EngineTestConfig();
  config.processors[0].concurrency = {ConcurrencyMode::kAdaptive, 4, 1};
  Start(config);
  FakeWorkerStream a("a"), b("b");
  Connect(*engine_, a, 100);
  Connect(*engine_, b, 100);
  SubmitDistinct(0, 20);
  // The limit is the processor's, over both streams.
  EXPECT_EQ(a.held().size() + b.held().size(), 4u);
  const ProcessorSnapshot p = Processor();
  EXPECT_TRUE(p.concurrency_adaptive);
  EXPECT_EQ(p.concurrency_limit, 4);
  EXPECT_EQ(p.in_flight, 4);
}

TEST_F(EngineGuardTest, FixedConcurrencyReportsStreamsTimesMaxInFlight) {
  Start(EngineTestConfig());
  const ProcessorSnapshot p = Processor();
  EXPECT_FALSE(p.concurrency_adaptive);
  const Config config = EngineTestConfig();
  const ProcessorConfig& processor = config.processors[0];
  EXPECT_EQ(p.concurrency_limit, int64_t{processor.streams} * processor.max_in_flight);
}

class EngineBreakerTest : public EngineGuardTest {
 protected:
  void SetUp() override {
    Config config = EngineTestConfig(FailurePolicy::kDeadLetter);
    CircuitBreakerConfig& breaker = config.processors[0].circuit_breaker;
    breaker.enabled = true;
    breaker.min_outcomes = 4;
    breaker.failure_ratio = 0.5;
    breaker.open_for = absl::Seconds(1);
    breaker.probes = 1;
    Start(config);
    id_ = Connect(*engine_, stream_, 100);
  }
  // Answers every held event with `status`.
  void AnswerAll(v1::Result::Status status) {
    for (const v1::Event& event : stream_.TakeHeld()) {
      engine_->OnResults(id_, ResultFor(event.id(), status, "downstream down"));
    }
  }

  FakeWorkerStream stream_{"s"};
  int64_t id_ = 0;
};

TEST_F(EngineBreakerTest, OpensStopsDispatchSparesFailuresAndClosesAfterAProbe) {
  SubmitDistinct(0, 6);
  std::vector<v1::Event> sent = stream_.TakeHeld();
  ASSERT_THAT(sent, SizeIs(6));
  // Three RETRYs count as attempts (closed); the 4th opens it and is spared
  // (given back, no attempt), and so are failures that come while it is
  // open, FAIL included: nothing is dead-lettered.
  for (int i = 0; i < 4; ++i) {
    engine_->OnResults(id_, ResultFor(sent[i].id(), v1::Result::RETRY, "downstream down"));
  }
  EXPECT_EQ(Processor().breaker_state, BreakerState::kOpen);
  for (int i = 4; i < 6; ++i) {
    engine_->OnResults(id_, ResultFor(sent[i].id(), v1::Result::FAIL, "downstream down"));
  }
  EngineSnapshot snapshot = engine_->Snapshot();
  EXPECT_EQ(snapshot.processors[0].breaker_opened, 1);
  EXPECT_EQ(snapshot.counters.retried, 3);
  EXPECT_EQ(snapshot.counters.breaker_spared, 3);
  EXPECT_EQ(snapshot.counters.failed, 0);
  // Open: nothing goes (not even the retries whose backoff is over) until
  // open_for passed.
  SubmitDistinct(6, 8);
  Tick(absl::Milliseconds(100), 9);
  EXPECT_THAT(stream_.held(), IsEmpty());
  // Half-open: one probe.
  Tick(absl::Milliseconds(100));
  ASSERT_THAT(stream_.held(), SizeIs(1));
  EXPECT_EQ(Processor().breaker_state, BreakerState::kHalfOpen);
  AnswerAll(v1::Result::OK);
  // Closed: the other seven go.
  EXPECT_EQ(Processor().breaker_state, BreakerState::kClosed);
  EXPECT_THAT(stream_.held(), SizeIs(7));
  AnswerAll(v1::Result::OK);
  EXPECT_EQ(writer_.pending(), 0u);
  EXPECT_EQ(engine_->Snapshot().counters.failed, 0);
  EXPECT_EQ(CommitOffset(*engine_, 0), 8);
}

TEST_F(EngineBreakerTest, AFailedProbeReopensAndATimeoutWhileOpenIsSpared) {
  SubmitDistinct(0, 5);
  std::vector<v1::Event> sent = stream_.TakeHeld();
  ASSERT_THAT(sent, SizeIs(5));
  for (int i = 0; i < 4; ++i) {
    engine_->OnResults(id_, ResultFor(sent[i].id(), v1::Result::RETRY, "downstream down"));
  }
  ASSERT_EQ(Processor().breaker_state, BreakerState::kOpen);
  // The 5th event's deadline (10 s) passes while open: spared, not failed.
  Tick(absl::Seconds(1));
  ASSERT_THAT(stream_.held(), SizeIs(1));  // the probe
  AnswerAll(v1::Result::RETRY);
  EXPECT_EQ(Processor().breaker_state, BreakerState::kOpen);
  EXPECT_EQ(Processor().breaker_opened, 2);
  Tick(absl::Seconds(10));
  const EngineSnapshot snapshot = engine_->Snapshot();
  EXPECT_EQ(snapshot.counters.timed_out, 1);
  EXPECT_EQ(snapshot.counters.failed, 0);
  EXPECT_EQ(writer_.pending(), 0u);
}

TEST_F(EngineGuardTest, WithoutTheBreakerFailuresTakeTheirPolicy) {
  Start(EngineTestConfig(FailurePolicy::kDeadLetter));
  FakeWorkerStream stream("s");
  const int64_t id = Connect(*engine_, stream, 100);
  SubmitDistinct(0, 6);
  for (const v1::Event& event : stream.TakeHeld()) {
    engine_->OnResults(id, ResultFor(event.id(), v1::Result::FAIL, "downstream down"));
  }
  EXPECT_EQ(writer_.pending(), 6u);
  EXPECT_FALSE(Processor().breaker_enabled);
}

}  // namespace
}  // namespace ferry::testing
