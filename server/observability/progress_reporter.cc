#include "server/observability/progress_reporter.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/common/log.h"

namespace ferry {

ProgressReporter::ProgressReporter(const Engine* engine, WatermarkSource watermarks,
                                   absl::Duration interval)
    : engine_(engine),
      watermarks_(std::move(watermarks)),
      interval_(interval),
      thread_([this] { LogInfo("progress", Line()); }, interval) {}

ProgressReporter::~ProgressReporter() { Stop(); }

void ProgressReporter::Start() {
  if (interval_ <= absl::ZeroDuration()) return;  // log.progress_interval: 0 turns it off
  thread_.Start();
}

void ProgressReporter::Stop() {
  if (thread_.Stop()) LogInfo("progress", Line());  // the final line
}

std::string ProgressReporter::Line() {
  const EngineSnapshot snapshot = engine_->Snapshot();
  const std::map<TopicPartition, int64_t> high = watermarks_();
  const absl::Time now = absl::Now();
  const double seconds = absl::ToDoubleSeconds(now - last_time_);
  const int64_t finished = snapshot.counters.acked + snapshot.counters.failed;
  const double rate = seconds > 0 ? (finished - last_acked_) / seconds : 0;
  last_acked_ = finished;
  last_time_ = now;
  // Lag: end offset minus committed position, over the partitions this
  // replica owns; `?` until both are known.
  int64_t lag = 0;
  int64_t committed_total = 0;
  bool lag_known = !snapshot.partitions.empty();
  for (const PartitionSnapshot& partition : snapshot.partitions) {
    auto it = high.find(partition.partition);
    const int64_t committed = partition.commit_offset.value_or(0);
    committed_total += committed;
    if (it == high.end() || it->second < 0) {
      lag_known = false;
    } else {
      lag += std::max<int64_t>(0, it->second - committed);
    }
  }
  // The commit blocker held longest: the partition whose oldest unfinished
  // event was consumed first.
  const PartitionSnapshot* blocker = nullptr;
  for (const PartitionSnapshot& partition : snapshot.partitions) {
    if (!partition.oldest_unfinished_since.has_value()) continue;
    if (blocker == nullptr || *partition.oldest_unfinished_since < *blocker->oldest_unfinished_since) {
      blocker = &partition;
    }
  }
  const std::string blocker_text =
      blocker == nullptr
          ? std::string("none")
          : absl::StrCat(blocker->partition.ToString(), "@", *blocker->lowest_unfinished, " age=",
                         absl::StrFormat("%.1fs", absl::ToDoubleSeconds(
                                                      now - *blocker->oldest_unfinished_since)));
  return absl::StrCat("rate=", static_cast<int64_t>(std::llround(rate)), "/s consumed=",
                      snapshot.counters.submitted, " acked=", snapshot.counters.acked,
                      " failed=", snapshot.counters.failed, " retried=",
                      snapshot.counters.retried, " redelivered=", snapshot.counters.redelivered,
                      " run_events=", snapshot.counters.run_events,
                      " not_attempted=", snapshot.counters.not_attempted,
                      " in_flight=", snapshot.in_flight, " buffered=", snapshot.buffered_events,
                      " streams=", snapshot.connected_streams, " partitions=",
                      snapshot.partitions.size(), " committed=", committed_total,
                      " lag=", lag_known ? absl::StrCat(lag) : std::string("?"),
                      " blocker=", blocker_text, " delayed=", snapshot.delay_stage_events);
}

}  // namespace ferry
