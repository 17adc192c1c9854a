#include "server/observability/metrics.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netdb.h>
#include <netinet/in.h>
#include <prometheus/client_metric.h>
#include <prometheus/exposer.h>
#include <prometheus/metric_type.h>
#include <unistd.h>

#include <algorithm>
#include <exception>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace ferry {
namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;

MetricFamily Family(std::string name, std::string help, MetricType type) {
  MetricFamily family;
  family.name = std::move(name);
  family.help = std::move(help);
  family.type = type;
  return family;
}

void AddGauge(MetricFamily& family, std::vector<ClientMetric::Label> labels, double value) {
  ClientMetric metric;
  metric.label = std::move(labels);
  metric.gauge.value = value;
  family.metric.push_back(std::move(metric));
}

void AddCounter(MetricFamily& family, std::vector<ClientMetric::Label> labels, double value) {
  ClientMetric metric;
  metric.label = std::move(labels);
  metric.counter.value = value;
  family.metric.push_back(std::move(metric));
}

MetricFamily Gauge(std::string name, std::string help, double value) {
  MetricFamily family = Family(std::move(name), std::move(help), MetricType::Gauge);
  AddGauge(family, {}, value);
  return family;
}

std::string ReadWholeFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream contents;
  contents << in.rdbuf();
  return contents.str();
}

}  // namespace

// ---- MetricsServer ----

absl::StatusOr<std::string> HttpListeningPort(const std::string& address) {
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 >= address.size()) {
    return absl::InvalidArgumentError(absl::StrCat("expected host:port, got \"", address, "\""));
  }
  const std::string host = address.substr(0, colon);
  const std::string port = address.substr(colon + 1);
  if (host == "[::]") return absl::StrCat("+", port);
  if (host == "[::1]") return absl::StrCat("127.0.0.1:", port);
  if (host.front() == '[') {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot serve metrics on ", address,
                     ": of IPv6 addresses only [::] and [::1] are supported; use [::], 0.0.0.0 "
                     "or an IPv4 address"));
  }
  in_addr ipv4{};
  if (host == "localhost" || inet_pton(AF_INET, host.c_str(), &ipv4) == 1) return address;
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* resolved = nullptr;
  if (getaddrinfo(host.c_str(), nullptr, &hints, &resolved) != 0 || resolved == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot serve metrics on ", address, ": ", host, " has no IPv4 address"));
  }
  char text[INET_ADDRSTRLEN] = {0};
  inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(resolved->ai_addr)->sin_addr, text,
            sizeof(text));
  freeaddrinfo(resolved);
  return absl::StrCat(text, ":", port);
}

absl::StatusOr<std::unique_ptr<MetricsServer>> MetricsServer::Start(const std::string& address) {
  absl::StatusOr<std::string> listening_port = HttpListeningPort(address);
  if (!listening_port.ok()) return listening_port.status();
  std::unique_ptr<prometheus::Exposer> exposer;
  try {
    exposer = std::make_unique<prometheus::Exposer>(*listening_port, /*num_threads=*/2);
  } catch (const std::exception& e) {
    return absl::UnavailableError(
        absl::StrCat("cannot serve metrics on ", address, ": ", e.what()));
  }
  const std::vector<int> ports = exposer->GetListeningPorts();
  if (ports.empty() || ports[0] <= 0) {
    return absl::UnavailableError(absl::StrCat("cannot serve metrics on ", address));
  }
  return std::unique_ptr<MetricsServer>(new MetricsServer(std::move(exposer), ports[0]));
}

MetricsServer::MetricsServer(std::unique_ptr<prometheus::Exposer> exposer, int port)
    : exposer_(std::move(exposer)), port_(port) {}

MetricsServer::~MetricsServer() = default;

void MetricsServer::Register(const std::weak_ptr<prometheus::Collectable>& collectable) {
  exposer_->RegisterCollectable(collectable);
}

// ---- StateCollector ----

int64_t CommittedPosition(const PartitionSnapshot& partition, const PartitionFetchState* fetch) {
  if (partition.last_committed.has_value()) return *partition.last_committed;
  if (partition.start_offset.has_value()) return *partition.start_offset;
  if (fetch != nullptr && fetch->position >= 0) return fetch->position;
  return -1;
}

namespace {

std::vector<std::string> ProcessorNames(const Config& config) {
  std::vector<std::string> names;
  for (const ProcessorConfig& processor : config.processors) names.push_back(processor.name);
  return names;
}

std::vector<int> ConfiguredStreams(const Config& config) {
  std::vector<int> streams;
  for (const ProcessorConfig& processor : config.processors) streams.push_back(processor.streams);
  return streams;
}

}  // namespace

StateCollector::StateCollector(const Config& config, SnapshotSource snapshots,
                               FetchStateSource fetch_states, const Clock* clock)
    : processor_names_(ProcessorNames(config)),
      configured_streams_(ConfiguredStreams(config)),
      max_buffered_events_(config.max_buffered_events),
      max_buffered_bytes_(config.max_buffered_bytes),
      lane_count_(config.lane_count),
      lane_capacity_(config.lane_capacity),
      max_delayed_events_(config.max_delayed_events),
      snapshots_(std::move(snapshots)),
      fetch_states_(std::move(fetch_states)),
      clock_(clock) {}

namespace {

// The per-partition gauge families, one series per assigned partition, in
// the order they are exposed.
enum PartitionGauge { kLag, kEnd, kCommitted, kBuffered, kInFlight, kAge, kBlocker, kPaused,
                      kBlocked, kPartitionGauges };
constexpr struct {
  const char* name;
  const char* help;
} kPartitionGaugeText[kPartitionGauges] = {
    {"ferry_partition_lag", "Consumer lag in records: end offset minus the committed position"},
    {"ferry_partition_end_offset", "End offset (high watermark) of the partition"},
    {"ferry_partition_committed_offset",
     "The group's committed position for the partition (what ferry committed, or where it "
     "started in this assignment)"},
    {"ferry_partition_buffered_events",
     "Events of the partition consumed and not finished (queued, delayed, at a worker or held)"},
    {"ferry_partition_in_flight_events",
     "Events of the partition at a worker, waiting for a result"},
    {"ferry_partition_oldest_unfinished_age_seconds",
     "Age of the oldest unfinished event of the partition, the commit blocker (0 when none)"},
    {"ferry_partition_oldest_unfinished_offset",
     "Offset of the oldest unfinished event, the commit blocker (absent when none)"},
    {"ferry_partition_paused",
     "1 when fetching the partition is paused (backpressure, a block failure, shutdown)"},
    {"ferry_partition_blocked", "1 when an on_failure: block failure holds the partition"},
};

struct PartitionFamilies {
  std::vector<MetricFamily> families;  // indexed by PartitionGauge

  PartitionFamilies() {
    for (const auto& text : kPartitionGaugeText) {
      families.push_back(Family(text.name, text.help, MetricType::Gauge));
    }
  }

  void Add(const PartitionSnapshot& partition, const PartitionFetchState* state, absl::Time now) {
    const std::vector<ClientMetric::Label> labels = {
        {"topic", partition.partition.topic},
        {"partition", absl::StrCat(partition.partition.partition)}};
    const int64_t position = CommittedPosition(partition, state);
    if (position >= 0) AddGauge(families[kCommitted], labels, static_cast<double>(position));
    if (state != nullptr && state->high_watermark >= 0) {
      AddGauge(families[kEnd], labels, static_cast<double>(state->high_watermark));
      if (position >= 0) {
        AddGauge(families[kLag], labels,
                 static_cast<double>(std::max<int64_t>(0, state->high_watermark - position)));
      }
    }
    AddGauge(families[kBuffered], labels, static_cast<double>(partition.buffered));
    AddGauge(families[kInFlight], labels, static_cast<double>(partition.in_flight));
    const double age_seconds =
        partition.oldest_unfinished_since.has_value()
            ? std::max(0.0, absl::ToDoubleSeconds(now - *partition.oldest_unfinished_since))
            : 0.0;
    AddGauge(families[kAge], labels, age_seconds);
    if (partition.lowest_unfinished.has_value()) {
      AddGauge(families[kBlocker], labels, static_cast<double>(*partition.lowest_unfinished));
    }
    AddGauge(families[kPaused], labels, state != nullptr && state->paused ? 1 : 0);
    AddGauge(families[kBlocked], labels, partition.blocked ? 1 : 0);
  }
};

// One unlabelled gauge: name, help, value.
struct GaugeRow {
  const char* name;
  const char* help;
  double value;
};

}  // namespace

std::vector<MetricFamily> StateCollector::Collect() const {
  const EngineSnapshot snapshot = snapshots_();
  const std::map<TopicPartition, PartitionFetchState> fetch = fetch_states_();
  PartitionFamilies partitions;
  const absl::Time now = clock_->Now();
  for (const PartitionSnapshot& partition : snapshot.partitions) {
    auto it = fetch.find(partition.partition);
    partitions.Add(partition, it != fetch.end() ? &it->second : nullptr, now);
  }
  std::vector<MetricFamily> families = std::move(partitions.families);
  const GaugeRow summary[] = {
      {"ferry_assigned_partitions", "Partitions assigned to this instance",
       static_cast<double>(snapshot.partitions.size())},
      {"ferry_buffered_events",
       "Events consumed and not finished, against budgets.max_buffered_events",
       static_cast<double>(snapshot.buffered_events)},
      {"ferry_buffered_events_budget", "budgets.max_buffered_events",
       static_cast<double>(max_buffered_events_)},
      {"ferry_buffered_bytes", "Bytes of the buffered events, against budgets.max_buffered_bytes",
       static_cast<double>(snapshot.buffered_bytes)},
      {"ferry_buffered_bytes_budget", "budgets.max_buffered_bytes",
       static_cast<double>(max_buffered_bytes_)},
      {"ferry_in_flight_events", "Events at workers, waiting for results",
       static_cast<double>(snapshot.in_flight)},
      {"ferry_queued_events",
       "Queue length: events waiting for dispatch (all lanes and unordered queues)",
       static_cast<double>(snapshot.queued_events)},
      {"ferry_longest_lane_queued_events",
       "Queue length of the longest lane (a lane is full at ferry_lane_capacity_events)",
       static_cast<double>(snapshot.longest_lane)},
      {"ferry_lane_capacity_events", "lanes.capacity", static_cast<double>(lane_capacity_)},
      {"ferry_lanes", "lanes.count", static_cast<double>(lane_count_)},
      {"ferry_delayed_events",
       "Events waiting for their time: in the delay stage (topics[].delay) or retries waiting "
       "out their backoff",
       static_cast<double>(snapshot.delayed_events)},
      {"ferry_delay_stage_events",
       "Events held until record timestamp + delay (topics[].delay), against "
       "ferry_delay_stage_capacity_events",
       static_cast<double>(snapshot.delay_stage_events)},
      {"ferry_delay_stage_capacity_events",
       "budgets.max_delayed_events: at this many delayed events fetching pauses",
       static_cast<double>(max_delayed_events_)},
      {"ferry_blocked_events", "Events held by on_failure: block failures",
       static_cast<double>(snapshot.blocked_events)},
      {"ferry_dead_letters_pending", "Dead letters being written to Kafka",
       static_cast<double>(snapshot.dead_letters_pending)},
  };
  for (const GaugeRow& row : summary) families.push_back(Gauge(row.name, row.help, row.value));
  AddProcessorFamilies(snapshot, families);
  return families;
}

// Per processor: connected and configured streams, credit, in flight; then
// the limits and breakers.
void StateCollector::AddProcessorFamilies(const EngineSnapshot& snapshot,
                                          std::vector<MetricFamily>& families) const {
  MetricFamily streams = Family("ferry_worker_streams",
                                "Connected worker streams (Ready received) per processor",
                                MetricType::Gauge);
  MetricFamily configured = Family("ferry_worker_streams_configured",
                                   "Streams configured per processor (processors[].streams)",
                                   MetricType::Gauge);
  MetricFamily credit = Family("ferry_worker_credit",
                               "Credit available: events the workers granted and ferry has not "
                               "yet sent",
                               MetricType::Gauge);
  MetricFamily worker_in_flight = Family("ferry_worker_in_flight_events",
                                         "Events at the processor's workers", MetricType::Gauge);
  for (size_t i = 0; i < processor_names_.size(); ++i) {
    const std::vector<ClientMetric::Label> labels = {{"processor", processor_names_[i]}};
    const ProcessorSnapshot processor =
        i < snapshot.processors.size() ? snapshot.processors[i] : ProcessorSnapshot{};
    AddGauge(streams, labels, processor.connected_streams);
    AddGauge(configured, labels, configured_streams_[i]);
    AddGauge(credit, labels, static_cast<double>(processor.credit));
    AddGauge(worker_in_flight, labels, static_cast<double>(processor.in_flight));
  }
  families.push_back(std::move(streams));
  families.push_back(std::move(configured));
  families.push_back(std::move(credit));
  families.push_back(std::move(worker_in_flight));
  AddProtectionFamilies(snapshot, families);
}

namespace {

// The breaker gauge's encoding, spelled out rather than cast from the enum
// so that reordering BreakerState cannot silently change what dashboards
// and the FerryCircuitBreakerOpen alert read.
double BreakerStateValue(BreakerState state) {
  switch (state) {
    case BreakerState::kClosed:
      return 0;
    case BreakerState::kOpen:
      return 1;
    case BreakerState::kHalfOpen:
      return 2;
  }
  return 0;
}

}  // namespace

// Per processor: the rate and in-flight limits in force, and the circuit
// breaker. Breaker series exist only for processors whose breaker is
// enabled, so "closed" never stands for "no breaker"; the families are
// always present (HELP and TYPE) so that rules naming them load everywhere.
void StateCollector::AddProtectionFamilies(const EngineSnapshot& snapshot,
                                           std::vector<MetricFamily>& families) const {
  MetricFamily rate = Family("ferry_processor_rate_limit_events_per_second",
                             "Dispatch rate limit in force per processor, configured or set by "
                             "an operator (0: no limit)",
                             MetricType::Gauge);
  MetricFamily concurrency = Family("ferry_processor_concurrency_limit",
                                    "In-flight limit in force per processor (adaptive, or "
                                    "streams x max_in_flight)",
                                    MetricType::Gauge);
  MetricFamily breaker = Family("ferry_circuit_breaker_state",
                                "Circuit breaker state per processor with the breaker enabled: "
                                "0 closed, 1 open, 2 half-open",
                                MetricType::Gauge);
  MetricFamily opened = Family("ferry_circuit_breaker_opened_total",
                               "Times the processor's circuit breaker opened",
                               MetricType::Counter);
  for (size_t i = 0; i < processor_names_.size(); ++i) {
    const std::vector<ClientMetric::Label> labels = {{"processor", processor_names_[i]}};
    const ProcessorSnapshot processor =
        i < snapshot.processors.size() ? snapshot.processors[i] : ProcessorSnapshot{};
    AddGauge(rate, labels, std::max(0.0, processor.rate_limit_eps));
    AddGauge(concurrency, labels, static_cast<double>(processor.concurrency_limit));
    if (!processor.breaker_enabled) continue;
    AddGauge(breaker, labels, BreakerStateValue(processor.breaker_state));
    // A counter never goes down; a negative count would be an engine bug.
    AddCounter(opened, labels, static_cast<double>(std::max<int64_t>(0, processor.breaker_opened)));
  }
  families.push_back(std::move(rate));
  families.push_back(std::move(concurrency));
  families.push_back(std::move(breaker));
  families.push_back(std::move(opened));
}

// ---- ProcessCollector ----

ProcessCollector::ProcessCollector(std::string proc_self) : proc_self_(std::move(proc_self)) {}

std::vector<MetricFamily> ProcessCollector::Collect() const {
  std::vector<MetricFamily> families;
  const double ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
  const double page_size = static_cast<double>(sysconf(_SC_PAGESIZE));

  // /proc/<pid>/stat: "pid (comm) state ..."; comm may hold spaces and
  // parentheses, so fields are counted after the last ')'. Field N (1-based,
  // as in proc(5)) is fields[N - 3].
  const std::string stat = ReadWholeFile(proc_self_ + "/stat");
  const size_t close = stat.rfind(')');
  if (close != std::string::npos && ticks > 0) {
    const std::vector<std::string> fields =
        absl::StrSplit(stat.substr(close + 1), ' ', absl::SkipWhitespace());
    auto field = [&fields](size_t n, double* out) {
      return n >= 3 && n - 3 < fields.size() && absl::SimpleAtod(fields[n - 3], out);
    };
    double utime = 0, stime = 0, start_ticks = 0, vsize = 0, rss = 0;
    if (field(14, &utime) && field(15, &stime)) {
      MetricFamily cpu = Family("process_cpu_seconds_total",
                                "Total user and system CPU time spent in seconds",
                                MetricType::Counter);
      AddCounter(cpu, {}, (utime + stime) / ticks);
      families.push_back(std::move(cpu));
    }
    if (field(23, &vsize)) {
      families.push_back(
          Gauge("process_virtual_memory_bytes", "Virtual memory size in bytes", vsize));
    }
    if (field(24, &rss)) {
      families.push_back(Gauge("process_resident_memory_bytes", "Resident memory size in bytes",
                               rss * page_size));
    }
    // Start time: boot time (/proc/stat btime) + start ticks.
    double boot_time = 0;
    for (absl::string_view line : absl::StrSplit(ReadWholeFile("/proc/stat"), '\n')) {
      if (absl::ConsumePrefix(&line, "btime ")) {
        // A malformed value leaves boot_time unspecified: no start time then.
        if (!absl::SimpleAtod(absl::StripAsciiWhitespace(line), &boot_time)) boot_time = 0;
      }
    }
    if (field(22, &start_ticks) && boot_time > 0) {
      families.push_back(Gauge("process_start_time_seconds",
                               "Start time of the process since unix epoch in seconds",
                               boot_time + start_ticks / ticks));
    }
  }

  if (DIR* dir = opendir((proc_self_ + "/fd").c_str()); dir != nullptr) {
    int open_fds = 0;
    while (const dirent* entry = readdir(dir)) {
      if (entry->d_name[0] != '.') ++open_fds;
    }
    closedir(dir);
    // Reading our own fd directory holds one descriptor open: not counted.
    if (proc_self_ == "/proc/self" && open_fds > 0) --open_fds;
    families.push_back(Gauge("process_open_fds", "Number of open file descriptors",
                             static_cast<double>(open_fds)));
  }
  for (absl::string_view line : absl::StrSplit(ReadWholeFile(proc_self_ + "/limits"), '\n')) {
    if (!absl::ConsumePrefix(&line, "Max open files")) continue;
    const std::vector<absl::string_view> values =
        absl::StrSplit(line, ' ', absl::SkipWhitespace());
    double soft = 0;
    if (!values.empty() && absl::SimpleAtod(values[0], &soft)) {
      families.push_back(
          Gauge("process_max_fds", "Maximum number of open file descriptors", soft));
    }
  }
  return families;
}

}  // namespace ferry
