// WorkerPoolStats: counters of ferry's worker streams, per processor:
//   ferry_worker_streams_opened_total{processor}
//   ferry_worker_stream_resets_total{processor,reason}
//     reason: error (the stream failed: worker crash, network, deadline),
//             closed (the worker ended it), protocol_error (ferry reset it)
// Streams ended by ferry's own shutdown are not resets. Connected streams and
// credit are gauges (server/observability/metrics.h).
//
// Threading: counters are atomic; safe from any thread.
#ifndef FERRY_SERVER_WORKERS_WORKER_POOL_STATS_H_
#define FERRY_SERVER_WORKERS_WORKER_POOL_STATS_H_

#include <prometheus/counter.h>
#include <prometheus/registry.h>

#include <array>
#include <vector>

#include "core/config/config.h"

namespace ferry {

enum class StreamEnd { kError = 0, kClosed = 1, kProtocolError = 2 };

class WorkerPoolStats {
 public:
  WorkerPoolStats(prometheus::Registry& registry, const Config& config);
  WorkerPoolStats(const WorkerPoolStats&) = delete;
  WorkerPoolStats& operator=(const WorkerPoolStats&) = delete;

  void Opened(int processor);
  void Reset(int processor, StreamEnd reason);

 private:
  std::vector<prometheus::Counter*> opened_;
  std::vector<std::array<prometheus::Counter*, 3>> resets_;
};

}  // namespace ferry

#endif  // FERRY_SERVER_WORKERS_WORKER_POOL_STATS_H_
