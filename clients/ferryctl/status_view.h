// The `ferryctl status --metrics` view: ferry's progress from two GetStatus
// answers of one replica — events per second, lag and the commit blocker
// (oldest unfinished offset and its age) per partition, buffers against
// their budgets, workers, and per processor and event type the enqueue vs
// processing time (where lag comes from: ferry's own queues, or a slow
// processor). Rates are the counters' difference over the answers'
// sampled_at_ms difference.
//
// Threading: plain functions.
#ifndef FERRY_CLIENTS_FERRYCTL_STATUS_VIEW_H_
#define FERRY_CLIENTS_FERRYCTL_STATUS_VIEW_H_

#include <string>

#include "ferry/v1/control.pb.h"

namespace ferry::ferryctl {

// `now` is the latest answer; `before` an earlier one of the same replica
// (null: rates show as "-"). A replica restarted in between (another
// started_at_ms) counts from zero.
std::string RenderStatus(const std::string& target, const v1::GetStatusResponse& now,
                         const v1::GetStatusResponse* before);

}  // namespace ferry::ferryctl

#endif  // FERRY_CLIENTS_FERRYCTL_STATUS_VIEW_H_
