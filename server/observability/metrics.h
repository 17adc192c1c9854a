// ferry's Prometheus endpoint and the metrics computed when it is scraped.
//
//   MetricsServer   HTTP GET /metrics (text format 0.0.4) on
//                   `server.metrics_listen`, serving every registered
//                   Collectable: the registry of counters and histograms
//                   (EngineStats, ConsumerStats, WorkerPoolStats) and the
//                   collectors below.
//   StateCollector  gauges of ferry's state, from Engine::Snapshot() and the
//                   consumer's fetch state at scrape time: per partition (lag,
//                   end/committed offsets, buffered, in flight, the oldest
//                   unfinished event's age and offset, paused, blocked), lanes,
//                   buffers against their budgets, worker streams and credit;
//                   per processor the rate and in-flight limits in force and
//                   the circuit breaker's state and openings.
//                   Series of revoked partitions disappear with them.
//   ProcessCollector  the standard process_* metrics from /proc/self (RSS,
//                   CPU, file descriptors, start time).
//
// The full list of names and labels is in deploy/observability/README.md.
//
// Threading: scrapes run on the HTTP server's threads; every source must be
// thread-safe (Engine::Snapshot and KafkaConsumer::FetchStates are).
#ifndef FERRY_SERVER_OBSERVABILITY_METRICS_H_
#define FERRY_SERVER_OBSERVABILITY_METRICS_H_

#include <prometheus/collectable.h>
#include <prometheus/metric_family.h>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/common/clock.h"
#include "core/config/config.h"
#include "core/engine/engine.h"
#include "core/kafka/consumer.h"

namespace prometheus {
class Exposer;
}  // namespace prometheus

namespace ferry {

// Destroying a MetricsServer stops the HTTP server; after a scrape that can
// take up to 2s (civetweb's worker poll quantum), so ferry stops it while
// the rest of its shutdown runs.
class MetricsServer {
 public:
  // Binds `address` (host:port; port 0 picks a free one). Unavailable when
  // the address cannot be bound.
  static absl::StatusOr<std::unique_ptr<MetricsServer>> Start(const std::string& address);
  ~MetricsServer();

  // Serves `collectable` at /metrics while it lives.
  void Register(const std::weak_ptr<prometheus::Collectable>& collectable);
  // The bound port.
  int port() const { return port_; }

 private:
  MetricsServer(std::unique_ptr<prometheus::Exposer> exposer, int port);
  std::unique_ptr<prometheus::Exposer> exposer_;
  const int port_;
};

class StateCollector final : public prometheus::Collectable {
 public:
  using SnapshotSource = std::function<EngineSnapshot()>;
  using FetchStateSource = std::function<std::map<TopicPartition, PartitionFetchState>()>;

  StateCollector(const Config& config, SnapshotSource snapshots, FetchStateSource fetch_states,
                 const Clock* clock);
  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  void AddProcessorFamilies(const EngineSnapshot& snapshot,
                            std::vector<prometheus::MetricFamily>& families) const;
  void AddProtectionFamilies(const EngineSnapshot& snapshot,
                             std::vector<prometheus::MetricFamily>& families) const;

  const std::vector<std::string> processor_names_;
  const std::vector<int> configured_streams_;
  const int64_t max_buffered_events_;
  const int64_t max_buffered_bytes_;
  const int lane_count_;
  const int lane_capacity_;
  const int64_t max_delayed_events_;
  const SnapshotSource snapshots_;
  const FetchStateSource fetch_states_;
  const Clock* const clock_;
};

class ProcessCollector final : public prometheus::Collectable {
 public:
  // `proc_self` is the /proc directory of the process to describe.
  explicit ProcessCollector(std::string proc_self = "/proc/self");
  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  const std::string proc_self_;
};

// The listening-port string the HTTP server (civetweb) takes for a
// host:port: IPv4 addresses and localhost as they are, `[::]:P` as `+P`
// (every IPv4 and IPv6 interface), `[::1]:P` as `127.0.0.1:P`, other host
// names resolved to their first IPv4 address. Other IPv6 addresses are not
// supported (InvalidArgument).
absl::StatusOr<std::string> HttpListeningPort(const std::string& address);

// The consumer-group position ferry reports as a partition's committed
// offset: what ferry committed in this assignment, else the first offset it
// consumed (fetching starts at the group's committed offset), else the
// fetch position; -1 when none is known.
int64_t CommittedPosition(const PartitionSnapshot& partition, const PartitionFetchState* fetch);

}  // namespace ferry

#endif  // FERRY_SERVER_OBSERVABILITY_METRICS_H_
