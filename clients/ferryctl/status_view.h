// The `ferryctl status` view: ferry's progress from two scrapes of its
// /metrics endpoint — events per second, lag and the commit blocker (oldest
// unfinished offset and its age) per partition, buffers, workers, and per
// processor and event type the enqueue vs processing time (where lag comes
// from: ferry's own queues, or a slow processor).
//
// Threading: plain functions.
#ifndef FERRY_CLIENTS_FERRYCTL_STATUS_VIEW_H_
#define FERRY_CLIENTS_FERRYCTL_STATUS_VIEW_H_

#include <string>

#include "absl/time/time.h"
#include "core/metrics_text.h"

namespace ferry::ferryctl {

// `now` is the latest scrape; `before` the previous one, `elapsed` earlier
// (null: rates show as "-").
std::string RenderStatus(const std::string& target, const Exposition& now,
                         const Exposition* before, absl::Duration elapsed);

}  // namespace ferry::ferryctl

#endif  // FERRY_CLIENTS_FERRYCTL_STATUS_VIEW_H_
