// The status view from canned GetStatus answers: rates over the interval,
// per partition lag and blocker, processors' enqueue vs processing time.
#include "clients/ferryctl/status_view.h"

#include <string>

#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"

namespace ferry::ferryctl {
namespace {

using ::testing::ContainsRegex;
using ::testing::HasSubstr;
using ::testing::Not;

v1::GetStatusResponse Parse(const std::string& text) {
  v1::GetStatusResponse response;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &response)) << text;
  return response;
}

// Two answers 2 s apart.
constexpr char kBefore[] = R"pb(
  sampled_at_ms: 1700000000000
  started_at_ms: 1699999000000
  counters { records_consumed: 1000 results_ok: 900 commits: 10 }
  processing { processor: "slow" type: "a" attempts: 100 results_ok: 100
               processing_seconds: 2 processing_count: 100 }
  processing { processor: "fast" type: "b" attempts: 800 results_ok: 800
               processing_seconds: 0.8 processing_count: 800 }
  partitions { topic: "events" partition: 0 committed_offset: 400 }
  partitions { topic: "events" partition: 1 committed_offset: 500 }
)pb";

constexpr char kNow[] = R"pb(
  replica: "ferry-0"
  sampled_at_ms: 1700000002000
  started_at_ms: 1699999000000
  counters { records_consumed: 3000 results_ok: 2750 results_fail: 20 commits: 30
             commit_errors: 1 }
  processing { processor: "slow" type: "a" attempts: 150 results_ok: 150
               processing_seconds: 7 processing_count: 150 }
  processing { processor: "fast" type: "b" attempts: 2620 results_ok: 2600 results_fail: 20
               processing_seconds: 2.62 processing_count: 2620 }
  processing { processor: "none" type: "other" }
  partitions { topic: "events" partition: 1 end_offset: 1500 committed_offset: 1500 lag: 0
               buffered: 0 lowest_unfinished_offset: -1 }
  partitions { topic: "events" partition: 0 end_offset: 2000 committed_offset: 800 lag: 1200
               buffered: 64 lowest_unfinished_offset: 800 blocked_for_ms: 12500
               fetch_paused: true }
  buffered_events: 64
  buffered_bytes: 2048
  buffers { max_buffered_events: 1000 max_buffered_bytes: 1048576 in_flight_events: 7
            queued_events: 50 longest_lane_events: 9 lane_capacity: 64 delayed_events: 3
            blocked_events: 4 }
  processors { name: "slow" streams: 2 streams_configured: 4 credit: 30 in_flight: 7
               stream_resets: 1 }
)pb";

TEST(StatusViewTest, RendersRatesPartitionsAndProcessors) {
  const v1::GetStatusResponse before = Parse(kBefore);
  const v1::GetStatusResponse now = Parse(kNow);
  const std::string view = RenderStatus("127.0.0.1:7070", now, &before);
  EXPECT_THAT(view, HasSubstr("ferry at 127.0.0.1:7070"));
  EXPECT_THAT(view, HasSubstr("replica ferry-0"));
  EXPECT_THAT(view, HasSubstr("consumed=1000"));  // 2000 records in 2s
  EXPECT_THAT(view, HasSubstr("ok=925"));         // (50 + 1800) / 2
  EXPECT_THAT(view, HasSubstr("fail=10"));
  EXPECT_THAT(view, HasSubstr("commits/s: 10 (errors 1)"));
  EXPECT_THAT(view, HasSubstr("lag=1200 over 2 partitions"));
  EXPECT_THAT(view, HasSubstr("buffered=64/1000 events, 2.0KiB/1.0MiB"));
  EXPECT_THAT(view, HasSubstr("in_flight=7  queued=50 (longest lane 9/64)  delayed=3  blocked=4"));
  EXPECT_THAT(view, HasSubstr("slow 2/4 streams, credit 30, in flight 7, resets 1"));
  // Partition 0: lag, 200 commits/s, blocked at 800 for 12.5s, paused.
  EXPECT_THAT(view, ContainsRegex("events +0 +2000 +800 +1200 +200 +64 +800 +12.5s +paused"));
  EXPECT_THAT(view, ContainsRegex("events +1 +1500 +1500 +0 +500 +0 +- +- +ok"));
  // Ordered by partition number whatever the answer's order.
  EXPECT_LT(view.find("events                   0"), view.find("events                   1"));
  // The slow processor averages 100ms over the interval, the fast one 1ms.
  EXPECT_THAT(view, ContainsRegex("slow +a +25 +- +100.0ms +0"));
  EXPECT_THAT(view, ContainsRegex("fast +b +910 +- +1.0ms +10"));
  // A series with no attempts is left out.
  EXPECT_THAT(view, Not(ContainsRegex("none +other")));
}

TEST(StatusViewTest, FirstAnswerHasNoRates) {
  const std::string view = RenderStatus("x:1", Parse(kNow), nullptr);
  EXPECT_THAT(view, HasSubstr("consumed=-"));
  EXPECT_THAT(view, ContainsRegex("events +0 +2000 +800 +1200 +- "));
  // Averages since start instead of over the interval.
  EXPECT_THAT(view, ContainsRegex("slow +a +- +- +46.7ms +-"));
}

TEST(StatusViewTest, ARestartCountsFromZero) {
  v1::GetStatusResponse before = Parse(kBefore);
  v1::GetStatusResponse now = Parse(kNow);
  now.set_started_at_ms(1700000001000);
  now.mutable_counters()->set_records_consumed(500);
  const std::string view = RenderStatus("x:1", now, &before);
  EXPECT_THAT(view, HasSubstr("consumed=250"));  // 500 since the restart, over 2s
  // An answer that is not later than the first gives no rates.
  EXPECT_THAT(RenderStatus("x:1", before, &now), HasSubstr("consumed=-"));
}

TEST(StatusViewTest, UnknownOffsetsAndNoPartitions) {
  v1::GetStatusResponse now;
  EXPECT_THAT(RenderStatus("x:1", now, nullptr), HasSubstr("(no partitions assigned)"));
  EXPECT_THAT(RenderStatus("x:1", now, nullptr), HasSubstr("workers: (none)"));
  v1::ProcessorStatus* plain = now.add_processors();
  plain->set_name("plain");
  plain->set_circuit_breaker("off");
  v1::ProcessorStatus* guarded = now.add_processors();
  guarded->set_name("guarded");
  guarded->set_rate_limit_events_per_second(50);
  guarded->set_rate_limit_overridden(true);
  guarded->set_concurrency_limit(9);
  guarded->set_concurrency_adaptive(true);
  guarded->set_circuit_breaker("open");
  guarded->set_circuit_breaker_opened(1);
  const std::string view = RenderStatus("x:1", now, nullptr);
  EXPECT_THAT(view, HasSubstr("plain 0/0 streams, credit 0, in flight 0, resets 0; guarded"));
  EXPECT_THAT(view, HasSubstr("resets 0, rate 50/s (operator), limit 9 adaptive, breaker open "
                              "(opened 1)\n"));
  now.clear_processors();
  v1::PartitionStatus* partition = now.add_partitions();
  partition->set_topic("t");
  partition->set_end_offset(-1);
  partition->set_committed_offset(-1);
  partition->set_lag(-1);
  partition->set_lowest_unfinished_offset(-1);
  partition->set_blocked(true);
  EXPECT_THAT(RenderStatus("x:1", now, nullptr),
              ContainsRegex("t +0 +- +- +- +- +0 +- +- +BLOCKED"));
}

}  // namespace
}  // namespace ferry::ferryctl
