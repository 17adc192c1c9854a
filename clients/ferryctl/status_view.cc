#include "clients/ferryctl/status_view.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace ferry::ferryctl {
namespace {

// Per-second rate of a counter between two scrapes, or nullopt.
std::optional<double> Rate(const Exposition& now, const Exposition* before,
                           absl::Duration elapsed, const std::string& name,
                           const MetricLabels& match = {}) {
  const double seconds = absl::ToDoubleSeconds(elapsed);
  if (before == nullptr || seconds <= 0) return std::nullopt;
  // A counter that went down means ferry restarted: count from zero.
  const double delta = now.Sum(name, match) - before->Sum(name, match);
  return (delta >= 0 ? delta : now.Sum(name, match)) / seconds;
}

std::string FormatRate(std::optional<double> rate) {
  if (!rate.has_value()) return "-";
  return absl::StrCat(static_cast<int64_t>(std::llround(*rate)));
}

std::string FormatSeconds(double seconds) {
  if (std::isnan(seconds)) return "-";
  if (seconds < 1e-3) return absl::StrFormat("%.0fus", seconds * 1e6);
  if (seconds < 1) return absl::StrFormat("%.1fms", seconds * 1e3);
  if (seconds < 120) return absl::StrFormat("%.1fs", seconds);
  return absl::StrFormat("%.0fm", seconds / 60);
}

std::string FormatBytes(double bytes) {
  if (bytes >= 1 << 30) return absl::StrFormat("%.1fGiB", bytes / (1 << 30));
  if (bytes >= 1 << 20) return absl::StrFormat("%.1fMiB", bytes / (1 << 20));
  if (bytes >= 1 << 10) return absl::StrFormat("%.1fKiB", bytes / (1 << 10));
  return absl::StrFormat("%.0fB", bytes);
}

std::string Int(double value) { return absl::StrCat(static_cast<int64_t>(std::llround(value))); }

// Average of a histogram over the interval (or since start without one).
double AverageSeconds(const Exposition& now, const Exposition* before, const std::string& name,
                      const MetricLabels& labels) {
  double sum = now.Sum(name + "_sum", labels);
  double count = now.Sum(name + "_count", labels);
  if (before != nullptr) {
    const double earlier_count = before->Sum(name + "_count", labels);
    if (count >= earlier_count) {
      sum -= before->Sum(name + "_sum", labels);
      count -= earlier_count;
    }
  }
  return count > 0 ? sum / count : std::nan("");
}

}  // namespace

std::string RenderStatus(const std::string& target, const Exposition& now,
                         const Exposition* before, absl::Duration elapsed) {
  std::string out;
  absl::StrAppend(&out, "ferry at ", target, "   ",
                  absl::FormatTime("%Y-%m-%d %H:%M:%S", absl::Now(), absl::LocalTimeZone()),
                  "\n");

  // Throughput.
  const std::optional<double> consumed =
      Rate(now, before, elapsed, "ferry_records_consumed_total");
  std::string finished;
  for (const char* status : {"ok", "retry", "fail", "timeout"}) {
    absl::StrAppend(&finished, finished.empty() ? "" : " ", status, "=",
                    FormatRate(Rate(now, before, elapsed, "ferry_results_total",
                                    {{"status", status}})));
  }
  absl::StrAppend(&out, "events/s: consumed=", FormatRate(consumed), "  results/s: ", finished,
                  "\n");

  // Totals.
  const std::vector<const MetricSample*> lags = now.Find("ferry_partition_lag");
  double lag = 0;
  for (const MetricSample* sample : lags) lag += sample->value;
  absl::StrAppend(
      &out, "lag=", Int(lag), " over ", Int(now.Sum("ferry_assigned_partitions")),
      " partitions  buffered=", Int(now.Sum("ferry_buffered_events")), "/",
      Int(now.Sum("ferry_buffered_events_budget")), " events, ",
      FormatBytes(now.Sum("ferry_buffered_bytes")), "/",
      FormatBytes(now.Sum("ferry_buffered_bytes_budget")),
      "  in_flight=", Int(now.Sum("ferry_in_flight_events")),
      "  queued=", Int(now.Sum("ferry_queued_events")),
      " (longest lane ", Int(now.Sum("ferry_longest_lane_queued_events")), "/",
      Int(now.Sum("ferry_lane_capacity_events")), ")  delayed=",
      Int(now.Sum("ferry_delayed_events")), "  blocked=", Int(now.Sum("ferry_blocked_events")),
      "\n");

  // Workers.
  std::string workers;
  for (const MetricSample* sample : now.Find("ferry_worker_streams")) {
    const std::string& processor = sample->labels.at("processor");
    absl::StrAppend(&workers, workers.empty() ? "" : "; ", processor, " ",
                    Int(sample->value), "/",
                    Int(now.Sum("ferry_worker_streams_configured", {{"processor", processor}})),
                    " streams, credit ",
                    Int(now.Sum("ferry_worker_credit", {{"processor", processor}})),
                    ", in flight ",
                    Int(now.Sum("ferry_worker_in_flight_events", {{"processor", processor}})));
  }
  absl::StrAppend(&out, "workers: ", workers.empty() ? "(none)" : workers, "\n");

  // Per processor and type: where the time goes.
  std::set<std::pair<std::string, std::string>> pairs;
  for (const MetricSample* sample : now.Find("ferry_attempts_total")) {
    if (sample->value > 0) pairs.emplace(sample->labels.at("processor"), sample->labels.at("type"));
  }
  if (!pairs.empty()) {
    absl::StrAppend(&out, "\n",
                    absl::StrFormat("%-16s %-20s %10s %12s %14s %10s\n", "PROCESSOR", "TYPE",
                                    "RESULTS/s", "ENQUEUE avg", "PROCESSING avg", "FAILED/s"));
    for (const auto& [processor, type] : pairs) {
      const MetricLabels labels = {{"processor", processor}, {"type", type}};
      MetricLabels failed = labels;
      failed["status"] = "fail";
      MetricLabels timed_out = labels;
      timed_out["status"] = "timeout";
      std::optional<double> failures = Rate(now, before, elapsed, "ferry_results_total", failed);
      std::optional<double> timeouts =
          Rate(now, before, elapsed, "ferry_results_total", timed_out);
      if (failures.has_value() && timeouts.has_value()) *failures += *timeouts;
      absl::StrAppend(
          &out,
          absl::StrFormat(
              "%-16s %-20s %10s %12s %14s %10s\n", processor, type,
              FormatRate(Rate(now, before, elapsed, "ferry_results_total", labels)),
              FormatSeconds(AverageSeconds(now, before, "ferry_enqueue_duration_seconds", labels)),
              FormatSeconds(
                  AverageSeconds(now, before, "ferry_processing_duration_seconds", labels)),
              FormatRate(failures)));
    }
  }

  // Partitions, ordered by topic and number.
  std::map<std::tuple<std::string, int64_t>, MetricLabels> partitions;
  for (const MetricSample* sample : now.Find("ferry_partition_buffered_events")) {
    int64_t number = 0;
    if (!absl::SimpleAtoi(sample->labels.at("partition"), &number)) continue;
    partitions[{sample->labels.at("topic"), number}] = sample->labels;
  }
  absl::StrAppend(&out, "\n",
                  absl::StrFormat("%-20s %5s %12s %12s %10s %10s %9s %14s %11s %s\n", "TOPIC",
                                  "PART", "END", "COMMITTED", "LAG", "COMMITS/s", "BUFFERED",
                                  "BLOCKER OFFSET", "BLOCKED FOR", "STATE"));
  for (const auto& [key, labels] : partitions) {
    auto value = [&now, &labels = labels](const std::string& name) -> std::string {
      std::optional<double> v = now.Value(name, labels);
      return v.has_value() ? Int(*v) : "-";
    };
    std::string state;
    if (now.Value("ferry_partition_blocked", labels).value_or(0) > 0) state = "BLOCKED";
    if (now.Value("ferry_partition_paused", labels).value_or(0) > 0) {
      absl::StrAppend(&state, state.empty() ? "" : ",", "paused");
    }
    std::string commit_rate = "-";
    if (before != nullptr && absl::ToDoubleSeconds(elapsed) > 0) {
      std::optional<double> a = now.Value("ferry_partition_committed_offset", labels);
      std::optional<double> b = before->Value("ferry_partition_committed_offset", labels);
      if (a.has_value() && b.has_value() && *a >= *b) {
        commit_rate = Int((*a - *b) / absl::ToDoubleSeconds(elapsed));
      }
    }
    const double age =
        now.Value("ferry_partition_oldest_unfinished_age_seconds", labels).value_or(0);
    absl::StrAppend(
        &out, absl::StrFormat("%-20s %5d %12s %12s %10s %10s %9s %14s %11s %s\n",
                              std::get<0>(key), std::get<1>(key),
                              value("ferry_partition_end_offset"),
                              value("ferry_partition_committed_offset"),
                              value("ferry_partition_lag"), commit_rate,
                              value("ferry_partition_buffered_events"),
                              value("ferry_partition_oldest_unfinished_offset"),
                              age > 0 ? FormatSeconds(age) : "-", state.empty() ? "ok" : state));
  }
  if (partitions.empty()) absl::StrAppend(&out, "(no partitions assigned)\n");
  return out;
}

}  // namespace ferry::ferryctl
