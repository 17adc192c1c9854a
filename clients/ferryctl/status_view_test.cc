// The status view from canned scrapes: rates over the interval, per
// partition lag and blocker, processors' enqueue vs processing time.
#include "clients/ferryctl/status_view.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ferry::ferryctl {
namespace {

using ::testing::ContainsRegex;
using ::testing::HasSubstr;

constexpr char kBefore[] = R"(# TYPE ferry_records_consumed_total counter
ferry_records_consumed_total{topic="events"} 1000
# TYPE ferry_results_total counter
ferry_results_total{processor="slow",type="a",status="ok"} 100
ferry_results_total{processor="fast",type="b",status="ok"} 800
ferry_results_total{processor="fast",type="b",status="fail"} 0
# TYPE ferry_attempts_total counter
ferry_attempts_total{processor="slow",type="a"} 100
ferry_attempts_total{processor="fast",type="b"} 800
# TYPE ferry_processing_duration_seconds histogram
ferry_processing_duration_seconds_bucket{processor="slow",type="a",le="+Inf"} 100
ferry_processing_duration_seconds_sum{processor="slow",type="a"} 2
ferry_processing_duration_seconds_count{processor="slow",type="a"} 100
ferry_processing_duration_seconds_bucket{processor="fast",type="b",le="+Inf"} 800
ferry_processing_duration_seconds_sum{processor="fast",type="b"} 0.8
ferry_processing_duration_seconds_count{processor="fast",type="b"} 800
# TYPE ferry_partition_committed_offset gauge
ferry_partition_committed_offset{topic="events",partition="0"} 400
ferry_partition_committed_offset{topic="events",partition="1"} 500
)";

constexpr char kNow[] = R"(# TYPE ferry_records_consumed_total counter
ferry_records_consumed_total{topic="events"} 3000
# TYPE ferry_results_total counter
ferry_results_total{processor="slow",type="a",status="ok"} 150
ferry_results_total{processor="fast",type="b",status="ok"} 2600
ferry_results_total{processor="fast",type="b",status="fail"} 20
# TYPE ferry_attempts_total counter
ferry_attempts_total{processor="slow",type="a"} 150
ferry_attempts_total{processor="fast",type="b"} 2620
# TYPE ferry_processing_duration_seconds histogram
ferry_processing_duration_seconds_bucket{processor="slow",type="a",le="+Inf"} 150
ferry_processing_duration_seconds_sum{processor="slow",type="a"} 7
ferry_processing_duration_seconds_count{processor="slow",type="a"} 150
ferry_processing_duration_seconds_bucket{processor="fast",type="b",le="+Inf"} 2620
ferry_processing_duration_seconds_sum{processor="fast",type="b"} 2.62
ferry_processing_duration_seconds_count{processor="fast",type="b"} 2620
# TYPE ferry_partition_lag gauge
ferry_partition_lag{topic="events",partition="0"} 1200
ferry_partition_lag{topic="events",partition="1"} 0
# TYPE ferry_partition_end_offset gauge
ferry_partition_end_offset{topic="events",partition="0"} 2000
ferry_partition_end_offset{topic="events",partition="1"} 1500
# TYPE ferry_partition_committed_offset gauge
ferry_partition_committed_offset{topic="events",partition="0"} 800
ferry_partition_committed_offset{topic="events",partition="1"} 1500
# TYPE ferry_partition_buffered_events gauge
ferry_partition_buffered_events{topic="events",partition="0"} 64
ferry_partition_buffered_events{topic="events",partition="1"} 0
# TYPE ferry_partition_oldest_unfinished_offset gauge
ferry_partition_oldest_unfinished_offset{topic="events",partition="0"} 800
# TYPE ferry_partition_oldest_unfinished_age_seconds gauge
ferry_partition_oldest_unfinished_age_seconds{topic="events",partition="0"} 12.5
ferry_partition_oldest_unfinished_age_seconds{topic="events",partition="1"} 0
# TYPE ferry_partition_paused gauge
ferry_partition_paused{topic="events",partition="0"} 1
ferry_partition_paused{topic="events",partition="1"} 0
# TYPE ferry_assigned_partitions gauge
ferry_assigned_partitions 2
# TYPE ferry_worker_streams gauge
ferry_worker_streams{processor="slow"} 2
# TYPE ferry_worker_streams_configured gauge
ferry_worker_streams_configured{processor="slow"} 4
)";

TEST(StatusViewTest, RendersRatesPartitionsAndProcessors) {
  absl::StatusOr<Exposition> before = ParseExposition(kBefore);
  absl::StatusOr<Exposition> now = ParseExposition(kNow);
  ASSERT_TRUE(before.ok() && now.ok());
  const std::string view = RenderStatus("127.0.0.1:9464", *now, &*before, absl::Seconds(2));
  EXPECT_THAT(view, HasSubstr("ferry at 127.0.0.1:9464"));
  EXPECT_THAT(view, HasSubstr("consumed=1000"));  // 2000 records in 2s
  EXPECT_THAT(view, HasSubstr("ok=925"));         // (50 + 1800) / 2
  EXPECT_THAT(view, HasSubstr("lag=1200 over 2 partitions"));
  EXPECT_THAT(view, HasSubstr("slow 2/4 streams"));
  // Partition 0: lag, 200 commits/s, blocked at 800 for 12.5s, paused.
  EXPECT_THAT(view, ContainsRegex("events +0 +2000 +800 +1200 +200 +64 +800 +12.5s +paused"));
  EXPECT_THAT(view, ContainsRegex("events +1 +1500 +1500 +0 +500 +0 +- +- +ok"));
  // The slow processor averages 100ms over the interval, the fast one 1ms.
  EXPECT_THAT(view, ContainsRegex("slow +a +25 +- +100.0ms +0"));
  EXPECT_THAT(view, ContainsRegex("fast +b +910 +- +1.0ms +10"));
}

TEST(StatusViewTest, FirstScrapeHasNoRates) {
  absl::StatusOr<Exposition> now = ParseExposition(kNow);
  ASSERT_TRUE(now.ok());
  const std::string view = RenderStatus("x:1", *now, nullptr, absl::ZeroDuration());
  EXPECT_THAT(view, HasSubstr("consumed=-"));
  EXPECT_THAT(view, ContainsRegex("events +0 +2000 +800 +1200 +- "));
}

}  // namespace
}  // namespace ferry::ferryctl
