#include "clients/ferryctl/status_view.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <optional>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "clients/ferryctl/rate_limit_view.h"

namespace ferry::ferryctl {
namespace {

// The span between two answers; `before` is null when there is none to
// take rates from.
struct Interval {
  const v1::GetStatusResponse* before = nullptr;
  double seconds = 0;
  // The replica restarted in between: its counters count from zero.
  bool restarted = false;
};

Interval Between(const v1::GetStatusResponse& now, const v1::GetStatusResponse* before) {
  Interval interval;
  if (before == nullptr || now.sampled_at_ms() <= before->sampled_at_ms()) return interval;
  interval.before = before;
  interval.seconds = static_cast<double>(now.sampled_at_ms() - before->sampled_at_ms()) / 1000;
  interval.restarted = now.started_at_ms() != before->started_at_ms();
  return interval;
}

// Per-second rate of the counter `field` of `now` against `before` (the
// same message of the earlier answer; null: it had none, so 0).
template <typename Message, typename Field>
std::optional<double> Rate(const Interval& interval, const Message& now, const Message* before,
                           Field field) {
  if (interval.before == nullptr) return std::nullopt;
  const int64_t current = field(now);
  const int64_t earlier = before != nullptr && !interval.restarted ? field(*before) : 0;
  // A counter that went down means ferry restarted: count from zero.
  return static_cast<double>(current >= earlier ? current - earlier : current) / interval.seconds;
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

// -1 (unknown, none) shows as "-".
std::string Known(int64_t value) { return value >= 0 ? absl::StrCat(value) : "-"; }

// Average time over the interval (or since start without one).
double AverageSeconds(const Interval& interval, double sum, int64_t count, double earlier_sum,
                      int64_t earlier_count) {
  if (interval.before != nullptr && !interval.restarted && count >= earlier_count) {
    sum -= earlier_sum;
    count -= earlier_count;
  }
  return count > 0 ? sum / static_cast<double>(count) : std::nan("");
}

void RenderTotals(const v1::GetStatusResponse& now, const Interval& interval, std::string* out) {
  const v1::StatusCounters* before =
      interval.before != nullptr ? &interval.before->counters() : nullptr;
  const v1::StatusCounters& counters = now.counters();
  std::string finished;
  for (const auto& [status, field] :
       std::vector<std::pair<const char*, int64_t (v1::StatusCounters::*)() const>>{
           {"ok", &v1::StatusCounters::results_ok},
           {"retry", &v1::StatusCounters::results_retry},
           {"fail", &v1::StatusCounters::results_fail},
           {"timeout", &v1::StatusCounters::results_timeout}}) {
    absl::StrAppend(&finished, finished.empty() ? "" : " ", status, "=",
                    FormatRate(Rate(interval, counters, before, std::mem_fn(field))));
  }
  absl::StrAppend(out, "events/s: consumed=",
                  FormatRate(Rate(interval, counters, before, std::mem_fn(
                                      &v1::StatusCounters::records_consumed))),
                  "  results/s: ", finished, "  commits/s: ",
                  FormatRate(Rate(interval, counters, before,
                                  std::mem_fn(&v1::StatusCounters::commits))),
                  " (errors ", counters.commit_errors(), ")\n");

  int64_t lag = 0;
  for (const v1::PartitionStatus& partition : now.partitions()) {
    lag += std::max<int64_t>(0, partition.lag());
  }
  const v1::BufferStatus& buffers = now.buffers();
  absl::StrAppend(
      out, "lag=", lag, " over ", now.partitions_size(), " partitions  buffered=",
      now.buffered_events(), "/", buffers.max_buffered_events(), " events, ",
      FormatBytes(static_cast<double>(now.buffered_bytes())), "/",
      FormatBytes(static_cast<double>(buffers.max_buffered_bytes())),
      "  in_flight=", buffers.in_flight_events(), "  queued=", buffers.queued_events(),
      " (longest lane ", buffers.longest_lane_events(), "/", buffers.lane_capacity(),
      ")  delayed=", buffers.delayed_events(), "  blocked=", buffers.blocked_events(), "\n");

  std::string workers;
  for (const v1::ProcessorStatus& processor : now.processors()) {
    absl::StrAppend(&workers, workers.empty() ? "" : "; ", processor.name(), " ",
                    processor.streams(), "/", processor.streams_configured(), " streams, credit ",
                    processor.credit(), ", in flight ", processor.in_flight(), ", resets ",
                    processor.stream_resets());
    // The protections, where they do something (the full cells are in
    // `ferryctl status`).
    if (processor.rate_limit_events_per_second() > 0 || processor.rate_limit_overridden()) {
      absl::StrAppend(&workers, ", rate ", DescribeRateLimit(processor));
    }
    if (processor.concurrency_adaptive()) {
      absl::StrAppend(&workers, ", limit ", DescribeConcurrency(processor));
    }
    if (!processor.circuit_breaker().empty() && processor.circuit_breaker() != "off") {
      absl::StrAppend(&workers, ", breaker ", DescribeBreaker(processor));
    }
  }
  absl::StrAppend(out, "workers: ", workers.empty() ? "(none)" : workers, "\n");
}

const v1::ProcessingStatus* FindSeries(const v1::GetStatusResponse* response,
                                       const v1::ProcessingStatus& like) {
  if (response == nullptr) return nullptr;
  for (const v1::ProcessingStatus& series : response->processing()) {
    if (series.processor() == like.processor() && series.type() == like.type()) return &series;
  }
  return nullptr;
}

// Per processor and type: where the time goes.
void RenderProcessing(const v1::GetStatusResponse& now, const Interval& interval,
                      std::string* out) {
  std::map<std::pair<std::string, std::string>, const v1::ProcessingStatus*> rows;
  for (const v1::ProcessingStatus& series : now.processing()) {
    if (series.attempts() > 0) rows[{series.processor(), series.type()}] = &series;
  }
  if (rows.empty()) return;
  absl::StrAppend(out, "\n",
                  absl::StrFormat("%-16s %-20s %10s %12s %14s %10s\n", "PROCESSOR", "TYPE",
                                  "RESULTS/s", "ENQUEUE avg", "PROCESSING avg", "FAILED/s"));
  const v1::ProcessingStatus empty;
  for (const auto& [key, series] : rows) {
    const v1::ProcessingStatus* earlier = FindSeries(interval.before, *series);
    const v1::ProcessingStatus& was = earlier != nullptr ? *earlier : empty;
    auto results = [](const v1::ProcessingStatus& s) {
      return s.results_ok() + s.results_retry() + s.results_fail() + s.results_timeout();
    };
    auto failed = [](const v1::ProcessingStatus& s) {
      return s.results_fail() + s.results_timeout();
    };
    absl::StrAppend(
        out, absl::StrFormat(
                 "%-16s %-20s %10s %12s %14s %10s\n", key.first, key.second,
                 FormatRate(Rate(interval, *series, earlier, results)),
                 FormatSeconds(AverageSeconds(interval, series->enqueue_seconds(),
                                              series->enqueue_count(), was.enqueue_seconds(),
                                              was.enqueue_count())),
                 FormatSeconds(AverageSeconds(interval, series->processing_seconds(),
                                              series->processing_count(),
                                              was.processing_seconds(), was.processing_count())),
                 FormatRate(Rate(interval, *series, earlier, failed))));
  }
}

// Commits per second of a partition: its committed offset's progress.
std::string CommitRate(const Interval& interval, const v1::PartitionStatus& partition) {
  if (interval.before == nullptr || partition.committed_offset() < 0) return "-";
  for (const v1::PartitionStatus& earlier : interval.before->partitions()) {
    if (earlier.topic() != partition.topic() || earlier.partition() != partition.partition()) {
      continue;
    }
    const int64_t progress = partition.committed_offset() - earlier.committed_offset();
    if (earlier.committed_offset() < 0 || progress < 0) return "-";
    return FormatRate(static_cast<double>(progress) / interval.seconds);
  }
  return "-";
}

// Partitions, ordered by topic and number.
void RenderPartitions(const v1::GetStatusResponse& now, const Interval& interval,
                      std::string* out) {
  std::map<std::tuple<std::string, int32_t>, const v1::PartitionStatus*> partitions;
  for (const v1::PartitionStatus& partition : now.partitions()) {
    partitions[{partition.topic(), partition.partition()}] = &partition;
  }
  absl::StrAppend(out, "\n",
                  absl::StrFormat("%-20s %5s %12s %12s %10s %10s %9s %14s %11s %s\n", "TOPIC",
                                  "PART", "END", "COMMITTED", "LAG", "COMMITS/s", "BUFFERED",
                                  "BLOCKER OFFSET", "BLOCKED FOR", "STATE"));
  for (const auto& [key, partition] : partitions) {
    std::string state;
    if (partition->blocked()) state = "BLOCKED";
    if (partition->fetch_paused() || partition->paused()) {
      absl::StrAppend(&state, state.empty() ? "" : ",", "paused");
    }
    const int64_t blocked_ms = partition->blocked_for_ms();
    absl::StrAppend(
        out, absl::StrFormat("%-20s %5d %12s %12s %10s %10s %9d %14s %11s %s\n",
                             std::get<0>(key), std::get<1>(key), Known(partition->end_offset()),
                             Known(partition->committed_offset()), Known(partition->lag()),
                             CommitRate(interval, *partition), partition->buffered(),
                             Known(partition->lowest_unfinished_offset()),
                             blocked_ms > 0 ? FormatSeconds(static_cast<double>(blocked_ms) / 1000)
                                            : "-",
                             state.empty() ? "ok" : state));
  }
  if (partitions.empty()) absl::StrAppend(out, "(no partitions assigned)\n");
}

}  // namespace

std::string RenderStatus(const std::string& target, const v1::GetStatusResponse& now,
                         const v1::GetStatusResponse* before) {
  std::string out;
  absl::StrAppend(&out, "ferry at ", target, "   ",
                  absl::FormatTime("%Y-%m-%d %H:%M:%S", absl::Now(), absl::LocalTimeZone()),
                  now.replica().empty() ? "" : absl::StrCat("   replica ", now.replica()), "\n");
  const Interval interval = Between(now, before);
  RenderTotals(now, interval, &out);
  RenderProcessing(now, interval, &out);
  RenderPartitions(now, interval, &out);
  return out;
}

}  // namespace ferry::ferryctl
