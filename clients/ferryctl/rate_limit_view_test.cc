// `ferryctl rate-limit`'s command line (every way to get it wrong), what it
// prints, and the processors table of `ferryctl status` with the rate limit,
// concurrency limit and breaker cells.
#include "clients/ferryctl/rate_limit_view.h"

#include <string>
#include <vector>

#include "clients/ferryctl/cli_flags.h"
#include "clients/ferryctl/control_view.h"
#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"

namespace ferry::ferryctl {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

absl::StatusOr<v1::SetRateLimitRequest> Parse(std::vector<std::string> args) {
  args.insert(args.begin(), "rate-limit");
  absl::StatusOr<CommandLine> line =
      CommandLine::Parse(args, {{"burst", false}, {"clear", true}});
  if (!line.ok()) return line.status();
  return ParseRateLimit(*line);
}

v1::ProcessorStatus Processor(const std::string& text) {
  v1::ProcessorStatus processor;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &processor)) << text;
  return processor;
}

TEST(ParseRateLimitTest, ARateABurstALiftAndAClear) {
  absl::StatusOr<v1::SetRateLimitRequest> request = Parse({"slow", "200", "--burst=20"});
  ASSERT_TRUE(request.ok()) << request.status();
  EXPECT_EQ(request->processor(), "slow");
  EXPECT_EQ(request->events_per_second(), 200);
  EXPECT_EQ(request->burst(), 20);
  EXPECT_FALSE(request->clear());
  request = Parse({"slow", "0.5", "--burst", "3"});  // the `--name value` form
  ASSERT_TRUE(request.ok()) << request.status();
  EXPECT_EQ(request->events_per_second(), 0.5);
  EXPECT_EQ(request->burst(), 3);
  request = Parse({"slow", "0"});
  ASSERT_TRUE(request.ok()) << request.status();
  EXPECT_EQ(request->events_per_second(), 0);
  EXPECT_FALSE(request->clear());
  request = Parse({"slow", "1e9"});
  ASSERT_TRUE(request.ok()) << request.status();
  request = Parse({"--clear", "slow"});  // flags anywhere
  ASSERT_TRUE(request.ok()) << request.status();
  EXPECT_TRUE(request->clear());
  EXPECT_EQ(request->events_per_second(), 0);
}

TEST(ParseRateLimitTest, EveryWrongFormSaysWhatToWrite) {
  struct Case {
    std::vector<std::string> args;
    std::string says;
  };
  const std::vector<Case> cases = {
      {{}, "name the processor"},
      {{""}, "name the processor"},
      {{"slow"}, "missing EVENTS_PER_SECOND"},
      {{"slow", "--burst=5"}, "missing EVENTS_PER_SECOND"},
      {{"slow", "nan"}, "is not a number"},
      {{"slow", "inf"}, "is not a number"},
      {{"slow", "1e10"}, "is not a number"},
      {{"slow", "200/s"}, "is not a number"},
      {{"slow", "fast"}, "is not a number"},
      {{"slow", ""}, "is not a number"},
      {{"slow", "--", "-5"}, "is not a number"},
      {{"slow", "200", "--burst=-1"}, "--burst must not be negative"},
      {{"slow", "200", "--burst=1.5"}, "--burst=1.5"},
      {{"slow", "200", "--burst=99999999999999999999"}, "--burst="},
      {{"slow", "--clear", "200"}, "--clear"},
      {{"slow", "--clear", "--burst=0"}, "--clear"},
      {{"slow", "--clear=maybe"}, "--clear=maybe"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<v1::SetRateLimitRequest> request = Parse(c.args);
    const std::string args = ::testing::PrintToString(c.args);
    ASSERT_FALSE(request.ok()) << args;
    EXPECT_EQ(request.status().code(), absl::StatusCode::kInvalidArgument) << args;
    EXPECT_THAT(request.status().message(), HasSubstr(c.says)) << args;
  }
}

TEST(RenderRateLimitTest, SaysWhatWasRecorded) {
  v1::SetRateLimitResponse response;
  response.set_control_offset(42);
  v1::SetRateLimitRequest request;
  request.set_processor("slow");
  request.set_events_per_second(12.5);
  EXPECT_EQ(RenderRateLimit(request, response),
            "rate limit of slow: 12.5 events/s, burst default (control offset 42); every "
            "replica applies it as it reads the control topic\n");
  request.set_burst(7);
  EXPECT_THAT(RenderRateLimit(request, response), HasSubstr("12.5 events/s, burst 7 "));
  request.set_events_per_second(0);
  request.set_burst(0);
  EXPECT_THAT(RenderRateLimit(request, response), HasSubstr("slow: lifted (no limit)"));
  request.set_clear(true);
  EXPECT_THAT(RenderRateLimit(request, response), HasSubstr("slow: back to its configured"));
}

TEST(ProtectionCellsTest, RateLimitConcurrencyAndBreaker) {
  const v1::ProcessorStatus configured = Processor(
      R"pb(rate_limit_events_per_second: 200 rate_limit_burst: 20 concurrency_limit: 40
           circuit_breaker: "closed")pb");
  EXPECT_EQ(DescribeRateLimit(configured), "200/s burst 20");
  EXPECT_EQ(DescribeConcurrency(configured), "40");
  EXPECT_EQ(DescribeBreaker(configured), "closed");
  const v1::ProcessorStatus operated = Processor(
      R"pb(rate_limit_events_per_second: 0.5 rate_limit_burst: 1 rate_limit_overridden: true
           concurrency_limit: 7 concurrency_adaptive: true circuit_breaker: "open"
           circuit_breaker_opened: 3)pb");
  EXPECT_EQ(DescribeRateLimit(operated), "0.5/s burst 1 (operator)");
  EXPECT_EQ(DescribeConcurrency(operated), "7 adaptive");
  EXPECT_EQ(DescribeBreaker(operated), "open (opened 3)");
  // Lifted by an operator: no limit, and who lifted it.
  EXPECT_EQ(DescribeRateLimit(Processor("rate_limit_overridden: true")), "none (operator)");
  // An older ferry's answer: nothing known.
  const v1::ProcessorStatus old = Processor(R"pb(name: "p")pb");
  EXPECT_EQ(DescribeRateLimit(old), "none");
  EXPECT_EQ(DescribeConcurrency(old), "-");
  EXPECT_EQ(DescribeBreaker(old), "-");
  EXPECT_EQ(DescribeBreaker(Processor(R"pb(circuit_breaker: "off")pb")), "off");
}

TEST(ProtectionCellsTest, StatusTablesShowAProcessorsTable) {
  v1::GetStatusResponse status;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(
      R"pb(replica: "ferry-a"
           processors {
             name: "slow" streams: 2 streams_configured: 4
             rate_limit_events_per_second: 200 rate_limit_overridden: true
             concurrency_limit: 17 concurrency_adaptive: true
             circuit_breaker: "half_open" circuit_breaker_opened: 2
           }
           processors { name: "fast" streams: 1 streams_configured: 1
                        concurrency_limit: 64 circuit_breaker: "off" })pb",
      &status));
  const std::string out = RenderStatusTables(status);
  EXPECT_THAT(out, HasSubstr("PROCESSOR  STREAMS  RATE-LIMIT        CONCURRENCY  BREAKER"));
  EXPECT_THAT(out, HasSubstr("slow       2/4      200/s (operator)  17 adaptive  half_open "
                             "(opened 2)\n"));
  EXPECT_THAT(out, HasSubstr("fast       1/1      none              64           off\n"));
  v1::GetStatusResponse none;
  EXPECT_THAT(RenderStatusTables(none), Not(HasSubstr("RATE-LIMIT")));
}

}  // namespace
}  // namespace ferry::ferryctl
