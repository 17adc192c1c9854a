// What ferryctl prints for the Control service's answers: plain-text tables
// in the spirit of Kafka's own tools (one row per partition, upper-case
// column names, "-" for unknown values), or the response as one JSON object
// for scripts.
//
// Threading: plain functions.
#ifndef FERRY_CLIENTS_FERRYCTL_CONTROL_VIEW_H_
#define FERRY_CLIENTS_FERRYCTL_CONTROL_VIEW_H_

#include <string>
#include <vector>

#include "ferry/v1/control.pb.h"
#include "google/protobuf/message.h"

namespace ferry::ferryctl {

// `ferryctl status`: this replica and its group, buffers, lanes, operator
// pauses, then a partitions table, a processors table (streams, rate limit,
// concurrency limit, circuit breaker) and a worker streams table.
std::string RenderStatusTables(const v1::GetStatusResponse& response);

// `ferryctl pause` / `resume`: the partitions the command selected, one row
// per topic with the partition numbers folded into ranges ("0-3,7").
std::string RenderPause(const v1::PauseResponse& response);
std::string RenderResume(const v1::ResumeResponse& response);

// `ferryctl reset`: planned and applied offsets per partition (with an ERROR
// column when an owner failed to apply one), and a note on partitions not
// applied yet.
std::string RenderReset(const v1::ResetOffsetsResponse& response);

// `ferryctl skip`: what happened to the event and who did it.
std::string RenderSkip(const v1::SkipOffsetRequest& request,
                       const v1::SkipOffsetResponse& response);

// The message as one line of proto3 JSON (field names in lowerCamelCase,
// int64 as strings, as protobuf prints them) with fields at their default
// value included, so `"applied": false` is there for scripts to test.
std::string RenderJson(const google::protobuf::Message& message);

// "0-3,7,9-10": sorted, duplicates dropped.
std::string FoldPartitions(std::vector<int32_t> partitions);

}  // namespace ferry::ferryctl

#endif  // FERRY_CLIENTS_FERRYCTL_CONTROL_VIEW_H_
