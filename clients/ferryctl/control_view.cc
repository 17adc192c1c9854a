#include "clients/ferryctl/control_view.h"

#include <algorithm>
#include <cstdint>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "clients/ferryctl/rate_limit_view.h"
#include "google/protobuf/util/json_util.h"

namespace ferry::ferryctl {
namespace {

// Left-aligned columns two spaces apart, as kafka-consumer-groups.sh prints
// them: easy to read and to cut with awk.
class Table {
 public:
  explicit Table(std::vector<std::string> header) { rows_.push_back(std::move(header)); }
  void Add(std::vector<std::string> row) { rows_.push_back(std::move(row)); }

  std::string Render() const {
    std::vector<size_t> widths(rows_.front().size(), 0);
    for (const std::vector<std::string>& row : rows_) {
      for (size_t i = 0; i < row.size(); ++i) widths[i] = std::max(widths[i], row[i].size());
    }
    std::string out;
    for (const std::vector<std::string>& row : rows_) {
      std::string line;
      for (size_t i = 0; i < row.size(); ++i) {
        absl::StrAppend(&line, row[i]);
        if (i + 1 < row.size()) line.append(widths[i] - row[i].size() + 2, ' ');
      }
      absl::StrAppend(&out, line, "\n");
    }
    return out;
  }

 private:
  std::vector<std::vector<std::string>> rows_;
};

// -1 is the protocol's "not known" (or "none").
std::string Offset(int64_t value) { return value < 0 ? "-" : absl::StrCat(value); }

std::string YesNo(bool value) { return value ? "yes" : "no"; }

std::string OrDash(const std::string& value) { return value.empty() ? "-" : value; }

std::string FormatBytes(int64_t bytes) {
  const double b = static_cast<double>(bytes);
  if (b >= 1 << 30) return absl::StrFormat("%.1fGiB", b / (1 << 30));
  if (b >= 1 << 20) return absl::StrFormat("%.1fMiB", b / (1 << 20));
  if (b >= 1 << 10) return absl::StrFormat("%.1fKiB", b / (1 << 10));
  return absl::StrCat(bytes, "B");
}

std::string Plural(int64_t n, const char* word) {
  return absl::StrCat(n, " ", word, n == 1 ? "" : "s");
}

// Partitions in (topic, partition) order whatever order the server used.
template <typename T>
std::vector<const T*> ByTopicPartition(const google::protobuf::RepeatedPtrField<T>& items) {
  std::vector<const T*> sorted;
  for (const T& item : items) sorted.push_back(&item);
  std::stable_sort(sorted.begin(), sorted.end(), [](const T* a, const T* b) {
    if (a->topic() != b->topic()) return a->topic() < b->topic();
    return a->partition() < b->partition();
  });
  return sorted;
}

std::string RenderSelection(const char* verb,
                            const google::protobuf::RepeatedPtrField<v1::PartitionRef>& refs,
                            int64_t control_offset) {
  std::string out = absl::StrCat(verb, " ", Plural(refs.size(), "partition"),
                                 " (control offset ", control_offset, ")\n");
  if (refs.empty()) return out;
  // One row per topic, in topic order.
  std::vector<std::pair<std::string, std::vector<int32_t>>> topics;
  for (const v1::PartitionRef* ref : ByTopicPartition(refs)) {
    if (topics.empty() || topics.back().first != ref->topic()) topics.push_back({ref->topic(), {}});
    topics.back().second.push_back(ref->partition());
  }
  Table table({"TOPIC", "PARTITIONS"});
  for (auto& [topic, partitions] : topics) table.Add({topic, FoldPartitions(partitions)});
  return out + table.Render();
}

}  // namespace

std::string FoldPartitions(std::vector<int32_t> partitions) {
  std::sort(partitions.begin(), partitions.end());
  partitions.erase(std::unique(partitions.begin(), partitions.end()), partitions.end());
  std::vector<std::string> parts;
  for (size_t i = 0; i < partitions.size();) {
    size_t j = i;
    while (j + 1 < partitions.size() && partitions[j + 1] == partitions[j] + 1) ++j;
    parts.push_back(j == i ? absl::StrCat(partitions[i])
                           : absl::StrCat(partitions[i], "-", partitions[j]));
    i = j + 1;
  }
  return absl::StrJoin(parts, ",");
}

std::string RenderStatusTables(const v1::GetStatusResponse& response) {
  std::string out = absl::StrCat("replica ", OrDash(response.replica()), "  group ",
                                 OrDash(response.group_id()), "\n");
  absl::StrAppend(&out, "buffered ", Plural(response.buffered_events(), "event"), " (",
                  FormatBytes(response.buffered_bytes()), ")  lanes in use ",
                  response.lanes_in_use(), "/", response.lane_count(), "\n");
  // Commands may hold commas ("T/0,3"), so they are separated by semicolons.
  absl::StrAppend(&out, "pause commands: ",
                  response.pause_commands().empty()
                      ? "none"
                      : absl::StrJoin(response.pause_commands(), "; "),
                  "\n\n");

  if (response.partitions().empty()) {
    absl::StrAppend(&out, "(no partitions assigned to this replica)\n");
  } else {
    Table partitions({"TOPIC", "PARTITION", "COMMITTED", "END", "LAG", "IN-FLIGHT", "BUFFERED",
                      "LOWEST-UNFINISHED", "BLOCKED-FOR", "FLAGS"});
    for (const v1::PartitionStatus* p : ByTopicPartition(response.partitions())) {
      std::vector<std::string> flags;
      if (p->paused()) flags.push_back("paused");
      if (p->fetch_paused()) flags.push_back("fetch-paused");
      if (p->blocked()) flags.push_back("blocked");
      const bool holding = p->lowest_unfinished_offset() >= 0 && p->blocked_for_ms() > 0;
      partitions.Add({p->topic(), absl::StrCat(p->partition()), Offset(p->committed_offset()),
                      Offset(p->end_offset()), Offset(p->lag()), absl::StrCat(p->in_flight()),
                      absl::StrCat(p->buffered()), Offset(p->lowest_unfinished_offset()),
                      holding ? absl::FormatDuration(absl::Milliseconds(p->blocked_for_ms()))
                              : "-",
                      flags.empty() ? "-" : absl::StrJoin(flags, ",")});
    }
    absl::StrAppend(&out, partitions.Render());
  }
  absl::StrAppend(&out, "\n");

  if (!response.processors().empty()) {
    Table processors({"PROCESSOR", "STREAMS", "RATE-LIMIT", "CONCURRENCY", "BREAKER"});
    for (const v1::ProcessorStatus& p : response.processors()) {
      processors.Add({p.name(), absl::StrCat(p.streams(), "/", p.streams_configured()),
                      DescribeRateLimit(p), DescribeConcurrency(p), DescribeBreaker(p)});
    }
    absl::StrAppend(&out, processors.Render(), "\n");
  }

  if (response.workers().empty()) {
    absl::StrAppend(&out, "(no worker streams)\n");
  } else {
    std::vector<const v1::WorkerStatus*> sorted;
    for (const v1::WorkerStatus& worker : response.workers()) sorted.push_back(&worker);
    std::stable_sort(sorted.begin(), sorted.end(),
                     [](const v1::WorkerStatus* a, const v1::WorkerStatus* b) {
                       if (a->processor() != b->processor()) {
                         return a->processor() < b->processor();
                       }
                       return a->stream_id() < b->stream_id();
                     });
    Table workers({"PROCESSOR", "STREAM", "READY", "CREDIT", "IN-FLIGHT", "WORKER"});
    for (const v1::WorkerStatus* w : sorted) {
      workers.Add({w->processor(), absl::StrCat(w->stream_id()), YesNo(w->ready()),
                   absl::StrCat(w->credit()), absl::StrCat(w->in_flight()),
                   OrDash(w->worker_name())});
    }
    absl::StrAppend(&out, workers.Render());
  }
  return out;
}

std::string RenderPause(const v1::PauseResponse& response) {
  return RenderSelection("paused", response.partitions(), response.control_offset());
}

std::string RenderResume(const v1::ResumeResponse& response) {
  return RenderSelection("resumed", response.partitions(), response.control_offset());
}

std::string RenderReset(const v1::ResetOffsetsResponse& response) {
  int64_t applied = 0;
  int64_t failed = 0;
  for (const v1::PartitionReset& p : response.partitions()) {
    applied += p.applied() ? 1 : 0;
    failed += !p.applied() && !p.error().empty() ? 1 : 0;
  }
  const int64_t total = response.partitions_size();
  std::string out =
      response.dry_run()
          ? absl::StrCat("dry run, nothing changed: ", Plural(total, "partition"), " planned\n")
          : absl::StrCat("control offset ", response.control_offset(), ": ", applied, " of ",
                         Plural(total, "partition"), " applied\n");
  if (response.partitions().empty()) return out;
  // The ERROR column only when an owner reported one: the usual table stays
  // narrow.
  const bool errors = failed > 0;
  std::vector<std::string> header = {"TOPIC", "PARTITION", "CURRENT", "NEW", "EARLIEST",
                                     "END",   "APPLIED",   "APPLIED-BY"};
  if (errors) header.push_back("ERROR");
  Table table(std::move(header));
  for (const v1::PartitionReset* p : ByTopicPartition(response.partitions())) {
    std::vector<std::string> row = {p->topic(),
                                    absl::StrCat(p->partition()),
                                    Offset(p->current_offset()),
                                    Offset(p->new_offset()),
                                    Offset(p->earliest_offset()),
                                    Offset(p->end_offset()),
                                    YesNo(p->applied()),
                                    OrDash(p->applied_by())};
    if (errors) row.push_back(OrDash(p->error()));
    table.Add(std::move(row));
  }
  absl::StrAppend(&out, table.Render());
  if (response.dry_run()) return out;
  const int64_t pending = total - applied - failed;
  std::string notes;
  if (pending > 0) {
    // The command is in the control topic either way; say so, so nobody
    // reruns it thinking it was lost.
    absl::StrAppend(&notes, Plural(pending, "partition"),
                    " not applied in time: the replica that owns ", pending == 1 ? "it" : "them",
                    " will apply the reset (nothing to rerun)\n");
  }
  if (failed > 0) {
    absl::StrAppend(&notes, Plural(failed, "partition"), " could not be applied: see ERROR\n");
  }
  if (!notes.empty()) absl::StrAppend(&out, "\n", notes);
  return out;
}

std::string RenderSkip(const v1::SkipOffsetRequest& request,
                       const v1::SkipOffsetResponse& response) {
  std::string meaning;
  if (response.outcome() == "dead_lettered") meaning = " (sent to the dead-letter topic)";
  if (response.outcome() == "marked_done") meaning = " (no dead-letter topic: marked done)";
  return absl::StrCat(request.topic(), "/", request.partition(), " offset ", request.offset(),
                      ": ", OrDash(response.outcome()), meaning, ", applied by ",
                      OrDash(response.applied_by()), "\n");
}

std::string RenderJson(const google::protobuf::Message& message) {
  google::protobuf::util::JsonPrintOptions options;
  options.always_print_primitive_fields = true;
  std::string json;
  // Printing a valid message cannot fail (it only fails for Any fields with
  // unknown types, which control.proto has none of).
  (void)google::protobuf::util::MessageToJsonString(message, &json, options);
  return json + "\n";
}

}  // namespace ferry::ferryctl
