#include "server/workers/worker_pool_stats.h"

namespace ferry {

WorkerPoolStats::WorkerPoolStats(prometheus::Registry& registry, const Config& config) {
  auto& opened = prometheus::BuildCounter()
                     .Name("ferry_worker_streams_opened_total")
                     .Help("Process streams opened to workers")
                     .Register(registry);
  auto& resets = prometheus::BuildCounter()
                     .Name("ferry_worker_stream_resets_total")
                     .Help("Worker streams that ended outside shutdown, by reason: error, "
                           "closed (by the worker), protocol_error (reset by ferry)")
                     .Register(registry);
  for (const ProcessorConfig& processor : config.processors) {
    opened_.push_back(&opened.Add({{"processor", processor.name}}));
    resets_.push_back({&resets.Add({{"processor", processor.name}, {"reason", "error"}}),
                       &resets.Add({{"processor", processor.name}, {"reason", "closed"}}),
                       &resets.Add({{"processor", processor.name}, {"reason", "protocol_error"}})});
  }
}

void WorkerPoolStats::Opened(int processor) {
  if (processor >= 0 && static_cast<size_t>(processor) < opened_.size()) {
    opened_[static_cast<size_t>(processor)]->Increment();
  }
}

void WorkerPoolStats::Reset(int processor, StreamEnd reason) {
  if (processor >= 0 && static_cast<size_t>(processor) < resets_.size()) {
    resets_[static_cast<size_t>(processor)][static_cast<size_t>(reason)]->Increment();
  }
}

}  // namespace ferry
