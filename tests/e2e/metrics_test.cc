// ferry's Prometheus endpoint, end to end: the real ferry binary, the mock
// Kafka cluster and example workers, /metrics scraped over HTTP.
//
// Checks:
//   * every scrape, during and after a run, parses as the text exposition
//     format (strictly: tests/tools/metrics_text.h), and counters never go down;
//   * the counters match what the test produced and what the workers
//     answered (records consumed, ok and fail results, attempts, histogram
//     counts, committed and end offsets), and lag reaches 0;
//   * a slow processor shows in its own processing-time histogram and not in
//     the other processor's;
//   * GetStatus carries the same counters (records, results, attempts,
//     enqueue and processing time, commits), buffers and workers as the
//     endpoint: one source, read twice;
//   * `ferryctl status --metrics` renders the live view from GetStatus;
//   * the Grafana dashboard and the alert rules (deploy/observability) name
//     only metrics ferry serves.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <nlohmann/json.hpp>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>
#include <grpcpp/grpcpp.h>
#include <yaml-cpp/yaml.h>

#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/time/clock.h"
#include "ferry/v1/control.grpc.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/e2e/e2e_support.h"
#include "tests/tools/kafka_admin.h"
#include "tests/tools/metrics_text.h"

namespace ferry::testing {
namespace {

using ::testing::HasSubstr;

// The port in ferry's "serving metrics on port N" line, or -1.
int FerryMetricsPort(const std::string& log) {
  const std::string marker = "serving metrics on port ";
  const size_t at = log.find(marker);
  if (at == std::string::npos) return -1;
  const size_t start = at + marker.size();
  const size_t end = log.find_first_not_of("0123456789", start);
  int port = -1;
  if (!absl::SimpleAtoi(log.substr(start, end - start), &port)) return -1;
  return port;
}

absl::StatusOr<std::string> WaitForMetricsAddress(Subprocess& ferry, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    const int port = FerryMetricsPort(ferry.Log());
    if (port > 0) return absl::StrCat("127.0.0.1:", port);
    if (ferry.TryWait().has_value()) return absl::InternalError("ferry exited:\n" + ferry.Log());
    absl::SleepFor(absl::Milliseconds(50));  // polling ferry's log
  }
  return absl::DeadlineExceededError("no metrics port in ferry's log:\n" + ferry.Log());
}

// ferry's Control address (server.listen), from its log.
std::string ControlAddress(const Subprocess& ferry) {
  return absl::StrCat("127.0.0.1:", FerryHealthPort(ferry.Log()));
}

absl::StatusOr<v1::GetStatusResponse> GetStatus(const Subprocess& ferry) {
  return GetFerryStatus(FerryHealthPort(ferry.Log()));
}

const v1::ProcessingStatus* FindProcessing(const v1::GetStatusResponse& status,
                                           const std::string& processor,
                                           const std::string& type) {
  for (const v1::ProcessingStatus& series : status.processing()) {
    if (series.processor() == processor && series.type() == type) return &series;
  }
  return nullptr;
}

// Produces `count` records carrying the header type=`type`.
absl::Status ProduceTyped(const std::string& bootstrap, const std::string& topic, int count,
                          int keys, int partitions, const std::string& type) {
  absl::StatusOr<Subprocess> producer = Subprocess::Start(
      {"tests/tools/kafka_tool", "produce", absl::StrCat("--bootstrap=", bootstrap),
       absl::StrCat("--topic=", topic), absl::StrCat("--count=", count),
       absl::StrCat("--keys=", keys), absl::StrCat("--partitions=", partitions),
       absl::StrCat("--headers=type=", type)},
      TempPath(absl::StrCat("produce-", topic, "-", type, ".log")));
  if (!producer.ok()) return producer.status();
  absl::StatusOr<int> exit = producer->Wait(absl::Seconds(120));
  if (!exit.ok()) return exit.status();
  if (*exit != 0) return absl::InternalError("produce failed:\n" + producer->Log());
  return absl::OkStatus();
}

// Counters of one scrape, keyed by series, to check they never go down.
std::map<std::string, double> Counters(const Exposition& metrics) {
  std::map<std::string, double> counters;
  for (const auto& [name, family] : metrics.families) {
    if (family.type != "counter" && family.type != "histogram") continue;
    for (const MetricSample& sample : family.samples) {
      std::string key = sample.name;
      for (const auto& [label, value] : sample.labels) absl::StrAppend(&key, ",", label, "=", value);
      counters[key] = sample.value;
    }
  }
  return counters;
}

double HistogramMean(const Exposition& metrics, const std::string& name,
                     const MetricLabels& labels) {
  const double count = metrics.Sum(name + "_count", labels);
  return count > 0 ? metrics.Sum(name + "_sum", labels) / count : -1;
}

TEST(MetricsTest, CountersMatchWhatWasProducedAndAnsweredAndLagReachesZero) {
  constexpr int kEvents = 30000;
  constexpr int kKeys = 200;
  constexpr int kPartitions = 4;
  // The example worker answers FAIL for sequence numbers 99, 199, ...: one
  // per key here (each key has 150 records).
  constexpr int kFailed = kKeys;
  absl::StatusOr<MockCluster> cluster = StartMockCluster("counted", kPartitions);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  ASSERT_TRUE(Produce(cluster->bootstrap, "counted", kEvents, kKeys, kPartitions).ok());
  // 4 handler threads x 300us: the run lasts about 2s, long enough to scrape
  // it in the middle.
  absl::StatusOr<Worker> worker =
      StartWorker("counted", 64, 0, {"--work_us=300", "--fail_every=100"});
  ASSERT_TRUE(worker.ok()) << worker.status();

  std::string config = FerryConfig(cluster->bootstrap, "counted-group", "counted",
                                   absl::StrCat("ipv4:127.0.0.1:", worker->port), /*streams=*/2);
  config = absl::StrReplaceAll(
      config, {{"  listen: 127.0.0.1:0\n", "  listen: 127.0.0.1:0\n  metrics_listen: 127.0.0.1:0\n"}});
  absl::StatusOr<Subprocess> ferry = StartFerry(config, "ferry-counted");
  ASSERT_TRUE(ferry.ok()) << ferry.status();
  absl::StatusOr<std::string> address = WaitForMetricsAddress(*ferry, absl::Seconds(30));
  ASSERT_TRUE(address.ok()) << address.status();

  // Scrape all through the run: every exposition parses, counters never
  // decrease, and some scrape lands mid-run.
  std::map<std::string, double> last_counters;
  int scrapes = 0;
  int mid_run = 0;
  const absl::Time deadline = absl::Now() + absl::Seconds(120);
  while (true) {
    ASSERT_LT(absl::Now(), deadline) << LogTail(*ferry);
    ASSERT_FALSE(ferry->TryWait().has_value()) << LogTail(*ferry);
    absl::StatusOr<Exposition> metrics = ScrapeMetrics(*address);
    ASSERT_TRUE(metrics.ok()) << metrics.status();
    ++scrapes;
    const std::map<std::string, double> counters = Counters(*metrics);
    for (const auto& [series, value] : last_counters) {
      auto now = counters.find(series);
      ASSERT_NE(now, counters.end()) << series << " disappeared";
      ASSERT_GE(now->second, value) << series << " went down";
    }
    last_counters = counters;
    const double answered = metrics->Sum("ferry_results_total");
    if (answered > 0 && answered < kEvents) ++mid_run;
    if (answered >= kEvents) break;
    absl::SleepFor(absl::Milliseconds(100));  // scrape interval
  }
  EXPECT_GT(mid_run, 0) << "no scrape saw the run in progress (" << scrapes << " scrapes)";

  absl::StatusOr<test_tools::GroupProgress> progress = WaitAllCommitted(
      cluster->bootstrap, "counted", "counted-group", kEvents, *ferry, absl::Seconds(120));
  ASSERT_TRUE(progress.ok()) << progress.status() << LogTail(*ferry);

  // Lag reaches 0 on every partition once the commits are in.
  Exposition metrics;
  const absl::Time lag_deadline = absl::Now() + absl::Seconds(30);
  while (true) {
    absl::StatusOr<Exposition> scraped = ScrapeMetrics(*address);
    ASSERT_TRUE(scraped.ok()) << scraped.status();
    metrics = *std::move(scraped);
    const std::vector<const MetricSample*> lags = metrics.Find("ferry_partition_lag");
    if (lags.size() == kPartitions && metrics.Sum("ferry_partition_lag") == 0) break;
    ASSERT_LT(absl::Now(), lag_deadline) << "lag did not reach 0: "
                                         << metrics.Sum("ferry_partition_lag") << " over "
                                         << lags.size() << " partitions";
    absl::SleepFor(absl::Milliseconds(200));  // commit interval
  }

  // Counters equal what was produced and answered.
  const MetricLabels topic = {{"topic", "counted"}};
  EXPECT_EQ(metrics.Value("ferry_records_consumed_total", topic), kEvents);
  EXPECT_GT(metrics.Sum("ferry_consumed_bytes_total", topic), kEvents * 10);
  EXPECT_EQ(metrics.Sum("ferry_results_total", {{"status", "ok"}}), kEvents - kFailed);
  EXPECT_EQ(metrics.Sum("ferry_results_total", {{"status", "fail"}}), kFailed);
  EXPECT_EQ(metrics.Sum("ferry_results_total", {{"status", "retry"}}), 0);
  EXPECT_EQ(metrics.Sum("ferry_results_total", {{"status", "timeout"}}), 0);
  // The topic's type is the topic name: a bounded label.
  const MetricLabels series = {{"processor", "default"}, {"type", "counted"}};
  // The worker takes runs (the SDK's default max_run): after each FAIL the
  // rest of its run comes back NOT_ATTEMPTED and is dispatched again, which
  // is neither an attempt nor processing, but is a second enqueue → dispatch.
  EXPECT_GT(metrics.Sum("ferry_run_events_total"), 0);
  const int64_t not_attempted = static_cast<int64_t>(
      metrics.Sum("ferry_results_total", {{"status", "not_attempted"}}));
  EXPECT_EQ(metrics.Value("ferry_attempts_total", series), kEvents);
  EXPECT_EQ(metrics.Value("ferry_processing_duration_seconds_count", series), kEvents);
  EXPECT_EQ(metrics.Value("ferry_enqueue_duration_seconds_count", series),
            kEvents + not_attempted);
  EXPECT_GE(HistogramMean(metrics, "ferry_processing_duration_seconds", series), 0.0003);
  EXPECT_EQ(metrics.Sum("ferry_terminal_failures_total", {{"policy", "skip"}}), kFailed);
  EXPECT_EQ(metrics.Sum("ferry_redeliveries_total"), 0);
  EXPECT_EQ(metrics.Sum("ferry_stale_results_total"), 0);
  EXPECT_EQ(metrics.Sum("ferry_poison_records_total"), 0);
  EXPECT_EQ(metrics.Sum("ferry_duplicate_records_total"), 0);

  // Offsets: ferry's committed and end offsets equal the broker's.
  absl::StatusOr<test_tools::OffsetMap> end = test_tools::ReadEndOffsets(cluster->bootstrap, "counted");
  ASSERT_TRUE(end.ok()) << end.status();
  for (const auto& [partition, end_offset] : *end) {
    const MetricLabels labels = {{"topic", "counted"}, {"partition", absl::StrCat(partition)}};
    EXPECT_EQ(metrics.Value("ferry_partition_end_offset", labels), end_offset) << partition;
    EXPECT_EQ(metrics.Value("ferry_partition_committed_offset", labels), end_offset) << partition;
    EXPECT_EQ(metrics.Value("ferry_partition_oldest_unfinished_age_seconds", labels), 0);
    EXPECT_EQ(metrics.Value("ferry_partition_paused", labels), 0);
  }
  EXPECT_EQ(metrics.Sum("ferry_partition_committed_offset"), kEvents);
  EXPECT_TRUE(metrics.Find("ferry_partition_oldest_unfinished_offset").empty());
  EXPECT_EQ(metrics.Value("ferry_assigned_partitions"), kPartitions);
  EXPECT_EQ(metrics.Value("ferry_buffered_events"), 0);
  EXPECT_EQ(metrics.Value("ferry_buffered_bytes"), 0);
  EXPECT_EQ(metrics.Value("ferry_in_flight_events"), 0);
  EXPECT_EQ(metrics.Value("ferry_queued_events"), 0);
  EXPECT_EQ(metrics.Value("ferry_worker_streams", {{"processor", "default"}}), 2);
  EXPECT_GT(metrics.Value("ferry_commits_total").value_or(0), 0);
  EXPECT_EQ(metrics.Value("ferry_commit_errors_total"), 0);
  EXPECT_GE(metrics.Value("ferry_rebalances_total", {{"event", "assigned"}}).value_or(0), 1);
  EXPECT_GT(metrics.Value("process_resident_memory_bytes").value_or(0), 1 << 20);
  EXPECT_GT(metrics.Value("process_start_time_seconds").value_or(0), 1.6e9);

  // GetStatus carries the same counters, read from the same registry (the
  // run is over: nothing moves between the scrape and the call but commits).
  absl::StatusOr<v1::GetStatusResponse> status = GetStatus(*ferry);
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_GT(status->started_at_ms(), 0);
  EXPECT_GE(status->sampled_at_ms(), status->started_at_ms());
  const v1::StatusCounters& counters = status->counters();
  EXPECT_EQ(counters.records_consumed(), kEvents);
  EXPECT_EQ(counters.bytes_consumed(), metrics.Sum("ferry_consumed_bytes_total"));
  EXPECT_EQ(counters.results_ok(), kEvents - kFailed);
  EXPECT_EQ(counters.results_fail(), kFailed);
  EXPECT_EQ(counters.results_retry() + counters.results_timeout(), 0);
  EXPECT_GE(counters.commits(), metrics.Value("ferry_commits_total").value_or(-1));
  EXPECT_EQ(counters.commit_errors(), 0);
  const v1::ProcessingStatus* counted = FindProcessing(*status, "default", "counted");
  ASSERT_NE(counted, nullptr);
  EXPECT_EQ(counted->attempts(), kEvents);
  EXPECT_EQ(counted->processing_count(), kEvents);
  EXPECT_EQ(counted->enqueue_count(), kEvents + not_attempted);
  EXPECT_DOUBLE_EQ(counted->processing_seconds(),
                   metrics.Sum("ferry_processing_duration_seconds_sum", series));
  EXPECT_GE(counted->processing_seconds() / kEvents, 0.0003);
  EXPECT_EQ(status->buffers().max_buffered_events(),
            metrics.Value("ferry_buffered_events_budget").value_or(-1));
  EXPECT_EQ(status->buffers().in_flight_events() + status->buffers().queued_events(), 0);
  ASSERT_EQ(status->processors_size(), 1);
  EXPECT_EQ(status->processors(0).streams(), 2);
  EXPECT_EQ(status->processors(0).streams_configured(), 2);
  EXPECT_EQ(status->processors(0).streams_opened(),
            metrics.Value("ferry_worker_streams_opened_total", {{"processor", "default"}})
                .value_or(-1));

  ASSERT_EQ(Terminate(*ferry, absl::Seconds(60)).value_or(-1), 0) << LogTail(*ferry);
  ASSERT_EQ(Terminate(worker->process, absl::Seconds(30)).value_or(-1), 0);
  // What the worker answered is what ferry counted.
  const std::map<std::string, int64_t> stats = ReadStats(worker->stats_path);
  EXPECT_EQ(stats.at("events_received"), kEvents + not_attempted);
  // Nothing is logged per record at the default level.
  int lines = 0;
  for (char c : ferry->Log()) lines += c == '\n';
  EXPECT_LT(lines, 2 * kFailed + 200) << "ferry logged per record";
}

TEST(MetricsTest, SlowProcessorShowsInItsOwnProcessingHistogramOnly) {
  // The slow worker sleeps 100 ms per event, so its observations cannot fall under 50 ms; a
  // no-op worker's should, even under TSan on a loaded 2-core machine (a 10 ms bound there
  // failed CI with 80% of the fast events under it).
  constexpr int kSlowEvents = 100;
  constexpr int kFastEvents = 2000;
  absl::StatusOr<MockCluster> cluster = StartMockCluster("typed", 4);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  ASSERT_TRUE(ProduceTyped(cluster->bootstrap, "typed", kSlowEvents, 40, 4, "slow").ok());
  ASSERT_TRUE(ProduceTyped(cluster->bootstrap, "typed", kFastEvents, 40, 4, "fast").ok());
  // 100 ms per event on the slow worker; none on the fast one.
  absl::StatusOr<Worker> slow = StartWorker("slow", 64, 0, {"--work_us=100000"});
  absl::StatusOr<Worker> fast = StartWorker("fast", 64);
  ASSERT_TRUE(slow.ok()) << slow.status();
  ASSERT_TRUE(fast.ok()) << fast.status();

  // No metrics_listen: it follows server.listen (port 0 here).
  const std::string config = absl::StrCat(
      "kafka:\n"
      "  bootstrap.servers: ", cluster->bootstrap, "\n",
      "  group.id: typed-group\n"
      "  session.timeout.ms: 6000\n"
      "  heartbeat.interval.ms: 500\n"
      "topics:\n"
      "  - name: typed\n"
      "    type: header:type\n"
      "processors:\n"
      "  - name: slow\n"
      "    target: ipv4:127.0.0.1:", slow->port, "\n",
      "    event_types: [slow]\n"
      "    timeout: 60s\n"
      "  - name: fast\n"
      "    target: ipv4:127.0.0.1:", fast->port, "\n",
      "    event_types: [fast]\n"
      "    timeout: 60s\n"
      "server:\n"
      "  listen: 127.0.0.1:0\n"
      "commit:\n"
      "  interval: 200ms\n"
      "log:\n"
      "  progress_interval: 1s\n");
  absl::StatusOr<Subprocess> ferry = StartFerry(config, "ferry-typed");
  ASSERT_TRUE(ferry.ok()) << ferry.status();
  absl::StatusOr<std::string> address = WaitForMetricsAddress(*ferry, absl::Seconds(30));
  ASSERT_TRUE(address.ok()) << address.status();
  absl::StatusOr<test_tools::GroupProgress> progress =
      WaitAllCommitted(cluster->bootstrap, "typed", "typed-group", kSlowEvents + kFastEvents,
                       *ferry, absl::Seconds(120));
  ASSERT_TRUE(progress.ok()) << progress.status() << LogTail(*ferry);

  absl::StatusOr<Exposition> metrics = ScrapeMetrics(*address);
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  const MetricLabels slow_series = {{"processor", "slow"}, {"type", "slow"}};
  const MetricLabels fast_series = {{"processor", "fast"}, {"type", "fast"}};
  const std::string processing = "ferry_processing_duration_seconds";
  EXPECT_EQ(metrics->Value(processing + "_count", slow_series), kSlowEvents);
  EXPECT_EQ(metrics->Value(processing + "_count", fast_series), kFastEvents);
  EXPECT_EQ(metrics->Sum("ferry_results_total", {{"processor", "slow"}, {"status", "ok"}}),
            kSlowEvents);
  EXPECT_EQ(metrics->Sum("ferry_results_total", {{"processor", "fast"}, {"status", "ok"}}),
            kFastEvents);
  // No other (processor, type) series saw anything.
  EXPECT_EQ(metrics->Sum(processing + "_count"), kSlowEvents + kFastEvents);

  const double slow_mean = HistogramMean(*metrics, processing, slow_series);
  const double fast_mean = HistogramMean(*metrics, processing, fast_series);
  EXPECT_GE(slow_mean, 0.100) << "the slow worker takes 100ms per event";
  EXPECT_LT(fast_mean, 0.050);
  EXPECT_LT(fast_mean * 2, slow_mean);
  // Bucket by bucket: no slow event under 50ms; the fast ones nearly all are. Had the slow
  // worker's time leaked into the fast series, its events would sit above 100ms.
  MetricLabels bucket = slow_series;
  bucket["le"] = "0.05";
  EXPECT_EQ(metrics->Value(processing + "_bucket", bucket), 0);
  bucket = fast_series;
  bucket["le"] = "0.05";
  EXPECT_GE(metrics->Value(processing + "_bucket", bucket).value_or(0), kFastEvents * 0.9);

  // GetStatus shows the slow processor in its own processing time too.
  absl::StatusOr<v1::GetStatusResponse> status = GetStatus(*ferry);
  ASSERT_TRUE(status.ok()) << status.status();
  const v1::ProcessingStatus* slow_status = FindProcessing(*status, "slow", "slow");
  const v1::ProcessingStatus* fast_status = FindProcessing(*status, "fast", "fast");
  ASSERT_TRUE(slow_status != nullptr && fast_status != nullptr);
  EXPECT_EQ(slow_status->processing_count(), kSlowEvents);
  EXPECT_GE(slow_status->processing_seconds() / kSlowEvents, 0.100);
  EXPECT_EQ(fast_status->processing_count(), kFastEvents);
  EXPECT_LT(fast_status->processing_seconds() / kFastEvents, 0.050);

  // ferryctl renders the live view from GetStatus on the Control port.
  const std::string control = ControlAddress(*ferry);
  absl::StatusOr<Subprocess> ferryctl = Subprocess::Start(
      {"clients/ferryctl/ferryctl", "status", "--metrics", "--server=" + control,
       "--interval=200ms"},
      TempPath("ferryctl-status.log"));
  ASSERT_TRUE(ferryctl.ok()) << ferryctl.status();
  ASSERT_EQ(ferryctl->Wait(absl::Seconds(30)).value_or(-1), 0) << ferryctl->Log();
  const std::string view = ferryctl->Log();
  EXPECT_THAT(view, HasSubstr("ferry at " + control));
  EXPECT_THAT(view, HasSubstr("lag=0 over 4 partitions"));
  EXPECT_THAT(view, ::testing::ContainsRegex("slow +slow "));
  EXPECT_THAT(view, ::testing::ContainsRegex("fast +fast "));
  EXPECT_THAT(view, ::testing::ContainsRegex("typed +3 "));

  ASSERT_EQ(Terminate(*ferry, absl::Seconds(60)).value_or(-1), 0) << LogTail(*ferry);
}

TEST(MetricsTest, AMetricsAddressInUseStopsFerryAndOffDisablesIt) {
  // Hold a port: ferry cannot serve metrics there.
  const int holder = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(holder, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(holder, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  ASSERT_EQ(listen(holder, 1), 0);
  socklen_t length = sizeof(address);
  ASSERT_EQ(getsockname(holder, reinterpret_cast<sockaddr*>(&address), &length), 0);
  const int taken = ntohs(address.sin_port);

  // No broker is needed: ferry stops before it touches Kafka.
  const std::string base = FerryConfig("127.0.0.1:1", "unused-group", "unused", "ipv4:127.0.0.1:1", 1);
  absl::StatusOr<Subprocess> ferry = StartFerry(
      absl::StrReplaceAll(base, {{"  listen: 127.0.0.1:0\n",
                                  absl::StrCat("  listen: 127.0.0.1:0\n  metrics_listen: 127.0.0.1:",
                                               taken, "\n")}}),
      "ferry-port-taken");
  ASSERT_TRUE(ferry.ok()) << ferry.status();
  EXPECT_EQ(ferry->Wait(absl::Seconds(30)).value_or(-1), 3) << ferry->Log();
  EXPECT_THAT(ferry->Log(), HasSubstr("server.metrics_listen"));
  close(holder);

  absl::StatusOr<Subprocess> off = StartFerry(
      absl::StrReplaceAll(base, {{"  listen: 127.0.0.1:0\n",
                                  "  listen: 127.0.0.1:0\n  metrics_listen: off\n"}}),
      "ferry-metrics-off");
  ASSERT_TRUE(off.ok()) << off.status();
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (off->Log().find("metrics disabled") == std::string::npos) {
    ASSERT_LT(absl::Now(), deadline) << off->Log();
    absl::SleepFor(absl::Milliseconds(50));  // polling ferry's log
  }
  EXPECT_EQ(FerryMetricsPort(off->Log()), -1);
  EXPECT_EQ(Terminate(*off, absl::Seconds(30)).value_or(-1), 0) << off->Log();
}

// Metric names in a PromQL expression.
std::set<std::string> MetricNames(const std::string& expr) {
  static const std::regex kName("\\b(ferry_[a-z0-9_]+|process_[a-z0-9_]+)\\b");
  std::set<std::string> names;
  for (auto it = std::sregex_iterator(expr.begin(), expr.end(), kName);
       it != std::sregex_iterator(); ++it) {
    names.insert((*it)[1].str());
  }
  return names;
}

// Every string under an "expr", "query" or "definition" key.
void CollectQueries(const nlohmann::json& node, std::vector<std::string>* queries) {
  if (node.is_object()) {
    for (auto it = node.begin(); it != node.end(); ++it) {
      if ((it.key() == "expr" || it.key() == "query" || it.key() == "definition") &&
          it.value().is_string()) {
        queries->push_back(it.value().get<std::string>());
      } else {
        CollectQueries(it.value(), queries);
      }
    }
  } else if (node.is_array()) {
    for (const nlohmann::json& item : node) CollectQueries(item, queries);
  }
}

TEST(MetricsTest, DashboardAndAlertsNameOnlyMetricsFerryServes) {
  absl::StatusOr<MockCluster> cluster = StartMockCluster("observed", 2);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  ASSERT_TRUE(Produce(cluster->bootstrap, "observed", 500, 10, 2).ok());
  absl::StatusOr<Worker> worker = StartWorker("observed", 64);
  ASSERT_TRUE(worker.ok()) << worker.status();
  absl::StatusOr<Subprocess> ferry =
      StartFerry(FerryConfig(cluster->bootstrap, "observed-group", "observed",
                             absl::StrCat("ipv4:127.0.0.1:", worker->port), 1),
                 "ferry-observed");
  ASSERT_TRUE(ferry.ok()) << ferry.status();
  absl::StatusOr<std::string> address = WaitForMetricsAddress(*ferry, absl::Seconds(30));
  ASSERT_TRUE(address.ok()) << address.status();
  ASSERT_TRUE(WaitAllCommitted(cluster->bootstrap, "observed", "observed-group", 500, *ferry,
                               absl::Seconds(120))
                  .ok())
      << LogTail(*ferry);
  absl::StatusOr<Exposition> metrics = ScrapeMetrics(*address);
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  std::set<std::string> served;
  for (const std::string& name : metrics->SampleNames()) served.insert(name);
  for (const auto& [name, family] : metrics->families) served.insert(name);

  // The dashboard.
  const std::string dashboard_text = ReadFile("deploy/observability/ferry-dashboard.json");
  ASSERT_FALSE(dashboard_text.empty());
  const nlohmann::json dashboard = nlohmann::json::parse(dashboard_text);
  std::vector<std::string> queries;
  CollectQueries(dashboard, &queries);
  ASSERT_GE(queries.size(), 20u);
  std::set<std::string> used;
  for (const std::string& query : queries) {
    for (const std::string& name : MetricNames(query)) {
      used.insert(name);
      EXPECT_EQ(served.count(name), 1u) << "dashboard query names " << name
                                        << ", which ferry does not serve: " << query;
    }
  }
  // It covers lag, throughput, enqueue vs processing time, failures, blockers.
  for (const char* name :
       {"ferry_partition_lag", "ferry_records_consumed_total", "ferry_results_total",
        "ferry_enqueue_duration_seconds_bucket", "ferry_processing_duration_seconds_bucket",
        "ferry_terminal_failures_total", "ferry_partition_oldest_unfinished_age_seconds",
        "ferry_partition_oldest_unfinished_offset", "ferry_queued_events",
        "ferry_worker_streams", "process_resident_memory_bytes"}) {
    EXPECT_EQ(used.count(name), 1u) << "the dashboard does not show " << name;
  }
  std::set<int> ids;
  for (const nlohmann::json& panel : dashboard.at("panels")) {
    EXPECT_TRUE(ids.insert(panel.at("id").get<int>()).second) << "duplicate panel id";
    EXPECT_TRUE(panel.contains("gridPos"));
    if (panel.at("type") == "row") continue;
    ASSERT_FALSE(panel.at("targets").empty()) << panel.at("title");
    for (const nlohmann::json& target : panel.at("targets")) {
      EXPECT_FALSE(target.at("expr").get<std::string>().empty()) << panel.at("title");
    }
  }

  // The alert rules.
  const YAML::Node rules = YAML::LoadFile("deploy/observability/ferry-alerts.yaml");
  std::set<std::string> alerts;
  for (const YAML::Node& group : rules["groups"]) {
    ASSERT_TRUE(group["name"].IsScalar());
    for (const YAML::Node& rule : group["rules"]) {
      const std::string alert = rule["alert"].as<std::string>();
      alerts.insert(alert);
      const std::string expr = rule["expr"].as<std::string>();
      EXPECT_FALSE(rule["labels"]["severity"].as<std::string>().empty()) << alert;
      EXPECT_FALSE(rule["annotations"]["summary"].as<std::string>().empty()) << alert;
      for (const std::string& name : MetricNames(expr)) {
        EXPECT_EQ(served.count(name), 1u)
            << "alert " << alert << " names " << name << ", which ferry does not serve";
      }
    }
  }
  EXPECT_EQ(alerts.count("FerryPartitionStuck"), 1u);
  EXPECT_EQ(alerts.count("FerryLagRising"), 1u);

  ASSERT_EQ(Terminate(*ferry, absl::Seconds(60)).value_or(-1), 0) << LogTail(*ferry);
}

}  // namespace
}  // namespace ferry::testing
