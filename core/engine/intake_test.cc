// Tests of the intake components: EventRouter, PoisonEvent, IntakeBudget,
// and how a worker's Result is read (core/engine/results.h).
#include <limits>
#include <string>

#include "core/engine/event_router.h"
#include "core/engine/intake.h"
#include "core/engine/intake_budget.h"
#include "core/engine/results.h"
#include "gtest/gtest.h"
#include "tests/mocks/engine_fixtures.h"

namespace ferry {
namespace {

using ::ferry::testing::EngineTestConfig;

TEST(EventRouterTest, RoutesTypesAndFallsBackToTheStarProcessor) {
  Config config = EngineTestConfig();
  config.processors[0].event_types = {"order"};
  EventRouter narrow(config);
  EXPECT_EQ(narrow.ProcessorFor("order"), 0);
  EXPECT_EQ(narrow.ProcessorFor("refund"), -1);
  EXPECT_EQ(narrow.default_processor(), -1);
  config.processors.push_back(config.processors[0]);
  config.processors[1].event_types = {"*"};
  config.topics.push_back(TopicConfig{"u", Ordering::kUnordered, {}, {}});
  EventRouter wide(config);
  EXPECT_EQ(wide.ProcessorFor("order"), 0);
  EXPECT_EQ(wide.ProcessorFor("refund"), 1);
  EXPECT_EQ(wide.default_processor(), 1);
  EXPECT_EQ(wide.OrderingFor("u"), Ordering::kUnordered);
  EXPECT_EQ(wide.OrderingFor("t"), Ordering::kKey);
  EXPECT_EQ(wide.OrderingFor("not-configured"), Ordering::kKey);
}

TEST(PoisonEventTest, KeepsTheRecordAndTakesNoLaneOrProcessor) {
  RawRecord record;
  record.topic = "t";
  record.partition = 2;
  record.offset = 9;
  record.key = std::string("\xff\xfe");  // not UTF-8: kept as bytes for the dead letter
  record.payload = "garbage";
  record.headers = {{"h", "v"}};
  record.timestamp_ms = 123;
  const absl::Time now = absl::FromUnixSeconds(50);
  const QueuedEvent queued = PoisonEvent(record, 4, now);
  EXPECT_EQ(queued.lane, -1);
  EXPECT_EQ(queued.processor, -1);
  EXPECT_EQ(queued.epoch, 4u);
  EXPECT_EQ(queued.bytes, record.ByteSize());
  EXPECT_EQ(queued.record_key, record.key);
  EXPECT_EQ(queued.event->offset(), 9);
  EXPECT_EQ(queued.event->payload(), "garbage");
  EXPECT_EQ(queued.event->headers_size(), 1);
  EXPECT_EQ(queued.queued_at, now);
}

TEST(IntakeBudgetTest, PausesAtABudgetAndResumesUnderEveryLowMark) {
  Config config = EngineTestConfig();
  config.max_buffered_events = 10;
  config.max_buffered_bytes = 1000;
  config.max_delayed_events = 4;
  config.resume_fraction = 0.5;
  IntakeBudget budget(config);
  for (int i = 0; i < 9; ++i) budget.Add(10);
  EXPECT_FALSE(budget.OverHighWatermark(0, false));
  EXPECT_TRUE(budget.OverHighWatermark(0, /*lane_full=*/true));
  EXPECT_TRUE(budget.OverHighWatermark(4, false));
  EXPECT_EQ(budget.Room(0).events, 1);
  EXPECT_EQ(budget.Room(3).events, 1);
  EXPECT_EQ(budget.Room(0).bytes, 910);
  budget.Add(10);
  EXPECT_TRUE(budget.OverHighWatermark(0, false));
  for (int i = 0; i < 5; ++i) budget.Release(10);
  EXPECT_EQ(budget.events(), 5);
  EXPECT_TRUE(budget.UnderLowWatermark(2, true));
  EXPECT_FALSE(budget.UnderLowWatermark(3, true));
  EXPECT_FALSE(budget.UnderLowWatermark(0, /*lanes_drained=*/false));
  budget.Add(1000);  // bytes alone reach the budget
  EXPECT_TRUE(budget.OverHighWatermark(0, false));
}

TEST(ResultsTest, StatusesMapToOutcomesAndUnknownOnesAreProtocolErrors) {
  EXPECT_EQ(ClassifyResult(v1::Result::OK), ResultOutcome::kOk);
  EXPECT_EQ(ClassifyResult(v1::Result::RETRY), ResultOutcome::kRetry);
  EXPECT_EQ(ClassifyResult(v1::Result::FAIL), ResultOutcome::kFail);
  EXPECT_EQ(ClassifyResult(v1::Result::STATUS_UNSPECIFIED), ResultOutcome::kFail);
  EXPECT_EQ(ClassifyResult(static_cast<v1::Result::Status>(99)), ResultOutcome::kUnknown);
  EXPECT_EQ(ClassifyResult(static_cast<v1::Result::Status>(-1)), ResultOutcome::kUnknown);
}

TEST(ResultsTest, ErrorsAreTheSanitizedMessageOrADefault) {
  v1::Result result;
  EXPECT_EQ(ResultError(result, ResultOutcome::kRetry), "RETRY");
  EXPECT_EQ(ResultError(result, ResultOutcome::kFail), "FAIL (no message)");
  result.set_message("bad\x1b[31m input");
  const std::string error = ResultError(result, ResultOutcome::kFail);
  EXPECT_EQ(error.find('\x1b'), std::string::npos);
  EXPECT_NE(error.find("input"), std::string::npos);
}

}  // namespace
}  // namespace ferry
