// The strict exposition-format parser: what it accepts and every rule it
// enforces.
#include "tests/tools/metrics_text.h"

#include <cmath>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ferry {
namespace {

using ::testing::HasSubstr;

constexpr char kValid[] = R"(# HELP ferry_results_total Results by status
# TYPE ferry_results_total counter
ferry_results_total{processor="a",status="ok"} 10
ferry_results_total{processor="a",status="fail",} 2
ferry_results_total{processor="b",status="ok"} 5 1700000000000
# a free comment
# HELP h_seconds A histogram\nwith an escaped newline
# TYPE h_seconds histogram
h_seconds_count{processor="a"} 3
h_seconds_sum{processor="a"} 1.5
h_seconds_bucket{processor="a",le="0.1"} 1
h_seconds_bucket{processor="a",le="1"} 2
h_seconds_bucket{processor="a",le="+Inf"} 3
# TYPE g gauge
g{v="quote \" backslash \\ newline \n"} -1.5e3
g{v="nan"} NaN
# TYPE s summary
s{quantile="0.5"} 1
s_sum 4
s_count 2
untyped_thing 7

)";

TEST(MetricsTextTest, ParsesValidText) {
  absl::StatusOr<Exposition> parsed = ParseExposition(kValid);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->families.at("ferry_results_total").type, "counter");
  EXPECT_EQ(parsed->families.at("ferry_results_total").help, "Results by status");
  EXPECT_EQ(parsed->families.at("h_seconds").help, "A histogram\nwith an escaped newline");
  EXPECT_EQ(parsed->Sum("ferry_results_total"), 17);
  EXPECT_EQ(parsed->Sum("ferry_results_total", {{"status", "ok"}}), 15);
  EXPECT_EQ(parsed->Value("ferry_results_total", {{"processor", "a"}, {"status", "fail"}}), 2);
  EXPECT_FALSE(parsed->Value("ferry_results_total", {{"processor", "a"}}).has_value());
  EXPECT_EQ(parsed->Value("h_seconds_bucket", {{"processor", "a"}, {"le", "1"}}), 2);
  EXPECT_EQ(parsed->Value("h_seconds_sum", {{"processor", "a"}}), 1.5);
  EXPECT_EQ(parsed->Value("g", {{"v", "quote \" backslash \\ newline \n"}}), -1500);
  EXPECT_TRUE(std::isnan(*parsed->Value("g", {{"v", "nan"}})));
  EXPECT_EQ(parsed->families.at("untyped_thing").type, "untyped");
  EXPECT_TRUE(parsed->HasFamily("s"));
  EXPECT_EQ(parsed->Value("s_count"), 2);
  const std::vector<std::string> names = parsed->SampleNames();
  EXPECT_NE(std::find(names.begin(), names.end(), "h_seconds_bucket"), names.end());
  EXPECT_NE(std::find(names.begin(), names.end(), "h_seconds"), names.end());
}

TEST(MetricsTextTest, EmptyIsValid) {
  EXPECT_TRUE(ParseExposition("").ok());
  EXPECT_TRUE(ParseExposition("# TYPE only_declared summary\n").ok());
}

struct BadCase {
  const char* text;
  const char* error;
};

TEST(MetricsTextTest, RejectsWhatPrometheusWouldReject) {
  const BadCase kCases[] = {
      {"1bad 1\n", "metric name"},
      {"ok{1x=\"a\"} 1\n", "label name"},
      {"ok{__name__=\"a\"} 1\n", "reserved"},
      {"ok{a=\"x} 1\n", "unterminated"},
      {"ok{a=\"\\t\"} 1\n", "invalid escape"},
      {"ok{a=\"1\" b=\"2\"} 1\n", "',' or '}'"},
      {"ok{a=\"1\",a=\"2\"} 1\n", "twice"},
      {"ok one\n", "invalid sample value"},
      {"ok 1 2 3\n", "after the timestamp"},
      {"ok 1 x\n", "invalid timestamp"},
      {"ok 1\nok 2\n", "duplicate series"},
      {"a 1\nb 1\na{x=\"1\"} 1\n", "not together"},
      {"# TYPE c counter\nc -1\n", "negative"},
      {"# TYPE c counter\n# TYPE c counter\n", "second TYPE"},
      {"# HELP c x\n# HELP c y\n", "second HELP"},
      {"c 1\n# TYPE c counter\n", "after its samples"},
      {"# TYPE c kounter\n", "unknown metric type"},
      {"# TYPE c counter\nc 1\nc_total 1\nc{x=\"1\"} 1\n", "not together"},
      {"# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_sum 1\nh_count 1\n", "+Inf"},
      {"# TYPE h histogram\nh_bucket{le=\"+Inf\"} 2\nh_sum 1\nh_count 1\n", "differs"},
      {"# TYPE h histogram\nh_bucket{le=\"1\"} 2\nh_bucket{le=\"+Inf\"} 1\nh_sum 1\nh_count 1\n",
       "below the previous"},
      {"# TYPE h histogram\nh_bucket 1\nh_sum 1\nh_count 1\n", "le label"},
      {"# TYPE h histogram\nh_bucket{le=\"+Inf\"} 1\nh_count 1\n", "_sum"},
      {"# TYPE h histogram\nh 1\n", "not a sample name"},
      {"# TYPE s summary\ns 1\n", "quantile"},
  };
  for (const BadCase& bad : kCases) {
    absl::StatusOr<Exposition> parsed = ParseExposition(bad.text);
    ASSERT_FALSE(parsed.ok()) << "accepted:\n" << bad.text;
    EXPECT_THAT(std::string(parsed.status().message()), HasSubstr(bad.error)) << bad.text;
  }
}

TEST(MetricsTextTest, ErrorsNameTheLine) {
  absl::StatusOr<Exposition> parsed = ParseExposition("a 1\nb 2\nc three\n");
  ASSERT_FALSE(parsed.ok());
  EXPECT_THAT(std::string(parsed.status().message()), HasSubstr("line 3:"));
}

TEST(MetricsTextTest, HttpGetReportsAnUnreachableEndpoint) {
  // Port 1 on loopback: nothing listens there.
  absl::StatusOr<std::string> body = HttpGet("127.0.0.1:1", "/metrics", absl::Seconds(2));
  EXPECT_FALSE(body.ok());
  EXPECT_FALSE(HttpGet("no-port", "/metrics", absl::Seconds(1)).ok());
}

}  // namespace
}  // namespace ferry
