// StatusMetrics: the part of GetStatus that `ferryctl status --metrics`
// shows (rates, buffers, workers, where time goes), read from the same
// sources this replica's /metrics serves so the two always agree:
//   counters   from the metrics registry that EngineStats, ConsumerStats and
//              WorkerPoolStats count in (read with Collect(), as a scrape
//              does; nothing is counted twice);
//   state      buffers, lanes and workers from the Engine::Snapshot() the
//              caller already took for the rest of GetStatus, budgets from
//              the config.
// Rates are left to the client: it calls GetStatus twice and divides the
// counters' difference by sampled_at_ms's (see proto/ferry/v1/control.proto).
//
// Threading: Fill is const and may run on any number of gRPC threads at
// once; the registry's Collect() takes its own locks.
#ifndef FERRY_SERVER_STATUS_METRICS_H_
#define FERRY_SERVER_STATUS_METRICS_H_

#include <prometheus/collectable.h>

#include "absl/time/time.h"
#include "core/config/config.h"
#include "core/engine/engine.h"
#include "ferry/v1/control.pb.h"

namespace ferry {

class StatusMetrics {
 public:
  // `counters` (may be null: counters stay 0) and `config` must outlive
  // this. `started` is when the counters started (the replica's start).
  StatusMetrics(const Config& config, const prometheus::Collectable* counters,
                absl::Time started);

  // Sets sampled_at_ms (`now`), started_at_ms, counters, buffers,
  // processors and processing of `response`.
  void Fill(const EngineSnapshot& snapshot, absl::Time now,
            v1::GetStatusResponse* response) const;

 private:
  void FillCounters(v1::GetStatusResponse* response) const;

  const Config& config_;
  const prometheus::Collectable* const counters_;
  const absl::Time started_;
};

}  // namespace ferry

#endif  // FERRY_SERVER_STATUS_METRICS_H_
