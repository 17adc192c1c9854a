#include "server/control_service.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "core/common/log.h"

namespace ferry {
namespace {

constexpr absl::Duration kKafkaTimeout = absl::Seconds(10);
constexpr absl::Duration kAppendTimeout = absl::Seconds(15);
constexpr absl::Duration kDefaultResetWait = absl::Seconds(15);
constexpr absl::Duration kDefaultSkipWait = absl::Seconds(10);
constexpr absl::Duration kPauseAckWait = absl::Seconds(10);
// Record timestamps may run slightly ahead of this machine's clock.
constexpr absl::Duration kClockSkew = absl::Seconds(60);

absl::Duration WaitFrom(int64_t wait_ms, absl::Duration fallback) {
  if (wait_ms <= 0) return fallback;
  return std::min(absl::Milliseconds(wait_ms), absl::Minutes(5));
}

std::string DescribeRateLimit(const v1::SetRateLimitRequest& request) {
  if (request.clear()) return "back to the configured limit";
  if (request.events_per_second() == 0) return "lifted (no limit)";
  return absl::StrCat(request.events_per_second(), "/s, burst ",
                      request.burst() == 0 ? std::string("default")
                                           : absl::StrCat(request.burst()));
}

// Why a reset request is refused before any Kafka round trip (no topic, no
// target, a negative or future timestamp, a negative offset), or OK.
absl::Status CheckResetRequest(const v1::ResetOffsetsRequest& request, absl::Time now) {
  if (request.topic().empty()) {
    return absl::InvalidArgumentError(
        "empty request: set topic (and optionally partitions) and one of to_timestamp_ms, "
        "to_earliest, to_latest, to_offset");
  }
  if (request.to_case() == v1::ResetOffsetsRequest::TO_NOT_SET ||
      (request.to_case() == v1::ResetOffsetsRequest::kToEarliest && !request.to_earliest()) ||
      (request.to_case() == v1::ResetOffsetsRequest::kToLatest && !request.to_latest())) {
    return absl::InvalidArgumentError(
        "say where to: set one of to_timestamp_ms, to_earliest, to_latest or to_offset");
  }
  if (request.to_case() == v1::ResetOffsetsRequest::kToTimestampMs) {
    if (request.to_timestamp_ms() < 0) {
      return absl::InvalidArgumentError("to_timestamp_ms must not be negative");
    }
    if (absl::FromUnixMillis(request.to_timestamp_ms()) > now + kClockSkew) {
      return absl::InvalidArgumentError(absl::StrCat(
          "timestamp ", absl::FormatTime(absl::RFC3339_sec,
                                         absl::FromUnixMillis(request.to_timestamp_ms()),
                                         absl::UTCTimeZone()),
          " is in the future; to skip to the end use to_latest"));
    }
  }
  if (request.to_case() == v1::ResetOffsetsRequest::kToOffset && request.to_offset() < 0) {
    return absl::InvalidArgumentError("to_offset must not be negative");
  }
  return absl::OkStatus();
}

// Copies what the partitions' owners answered onto the planned resets they
// answer for; a partition nobody answered for keeps applied = false.
void MarkApplied(const std::vector<ControlLog::AppliedResult>& results,
                 v1::ResetOffsetsResponse* response) {
  for (v1::PartitionReset& planned : *response->mutable_partitions()) {
    for (const ControlLog::AppliedResult& applied : results) {
      if (applied.result.topic() != planned.topic() ||
          applied.result.partition() != planned.partition()) {
        continue;
      }
      planned.set_applied(applied.result.ok());
      planned.set_applied_by(applied.applied_by);
      planned.set_error(applied.result.error());
    }
  }
}

}  // namespace

absl::StatusOr<v1::internal::RateLimitChange> RateLimitChangeFor(
    const Config& config, const v1::SetRateLimitRequest& request) {
  std::vector<std::string> names;
  bool configured = false;
  for (const ProcessorConfig& processor : config.processors) {
    configured = configured || processor.name == request.processor();
    names.push_back(processor.name);
  }
  if (request.processor().empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "empty request: name the processor (one of: ", absl::StrJoin(names, ", "), ")"));
  }
  if (!configured) {
    return absl::NotFoundError(absl::StrCat("processor \"", request.processor(),
                                            "\" is not configured (its processors: ",
                                            absl::StrJoin(names, ", "), ")"));
  }
  const double rate = request.events_per_second();
  if (request.clear()) {
    if (rate != 0 || request.burst() != 0) {
      return absl::InvalidArgumentError(
          "clear returns the processor to its configured rate limit: set no "
          "events_per_second or burst with it (0 without clear lifts the limit)");
    }
  } else if (!std::isfinite(rate) || rate < 0 || rate > kMaxEventsPerSecond) {
    return absl::InvalidArgumentError(absl::StrCat(
        "events_per_second must be a number from 0 (no limit) to ",
        absl::StrFormat("%.0f", kMaxEventsPerSecond), ", got ", rate));
  }
  if (request.burst() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("burst must not be negative (0: the default), got ", request.burst()));
  }
  v1::internal::RateLimitChange change;
  change.set_processor(request.processor());
  change.set_events_per_second(rate);
  change.set_burst(request.burst());
  change.set_clear(request.clear());
  return change;
}

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

ControlService::ControlService(const Config& config, Engine* engine, KafkaConsumer* consumer,
                               ControlLog* control, std::string token,
                               const prometheus::Collectable* counters)
    : config_(config),
      engine_(engine),
      consumer_(consumer),
      control_(control),
      token_(std::move(token)),
      status_metrics_(config, counters, absl::Now()) {}

absl::Status ControlService::Authorize(const grpc::ServerContextBase& context) const {
  if (token_.empty()) return absl::OkStatus();
  const auto& metadata = context.client_metadata();
  auto it = metadata.find("authorization");
  if (it == metadata.end()) {
    return absl::UnauthenticatedError(
        "this ferry requires a bearer token: send `authorization: Bearer <token>` metadata "
        "(ferryctl --token_file, grpcurl -H 'authorization: Bearer ...')");
  }
  const std::string presented(it->second.data(), it->second.size());
  // Compare every byte whatever the outcome, so timing does not reveal how
  // much of a guess was right.
  const std::string expected = absl::StrCat("Bearer ", token_);
  unsigned char difference = presented.size() == expected.size() ? 0 : 1;
  for (size_t i = 0; i < expected.size(); ++i) {
    const unsigned char c = i < presented.size() ? static_cast<unsigned char>(presented[i]) : 0;
    difference |= static_cast<unsigned char>(c ^ static_cast<unsigned char>(expected[i]));
  }
  if (difference != 0) return absl::UnauthenticatedError("wrong bearer token");
  return absl::OkStatus();
}

absl::StatusOr<std::vector<int32_t>> ControlService::SelectPartitions(
    const std::string& topic, const std::vector<int32_t>& partitions) {
  bool consumed = false;
  std::vector<std::string> topics;
  for (const TopicConfig& t : config_.topics) {
    consumed = consumed || t.name == topic;
    topics.push_back(t.name);
  }
  if (!consumed) {
    return absl::NotFoundError(absl::StrCat("topic \"", topic,
                                            "\" is not consumed by ferry (its topics: ",
                                            absl::StrJoin(topics, ", "), ")"));
  }
  absl::StatusOr<int32_t> count = control_->PartitionCount(topic, kKafkaTimeout);
  if (!count.ok()) return count.status();
  std::vector<int32_t> selected;
  if (partitions.empty()) {
    for (int32_t p = 0; p < *count; ++p) selected.push_back(p);
    return selected;
  }
  std::set<int32_t> seen;
  for (int32_t p : partitions) {
    if (p < 0 || p >= *count) {
      return absl::InvalidArgumentError(absl::StrCat("partition ", p, " is out of range: topic ",
                                                     topic, " has partitions 0..", *count - 1));
    }
    if (seen.insert(p).second) selected.push_back(p);
  }
  return selected;
}

absl::StatusOr<int64_t> ControlService::ChangePause(bool paused, bool all,
                                                    const std::string& topic,
                                                    const std::vector<int32_t>& partitions,
                                                    std::vector<TopicPartition>* selected) {
  const char* verb = paused ? "pause" : "resume";
  if (all && (!topic.empty() || !partitions.empty())) {
    return absl::InvalidArgumentError(
        absl::StrCat("set either all=true or a topic (with optional partitions) to ", verb,
                     ", not both"));
  }
  if (!all && topic.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "empty request: say what to ", verb, ": all=true, or a topic (and optionally partitions)"));
  }
  v1::internal::ControlLogRecord record;
  v1::internal::PauseChange* change = record.mutable_pause();
  change->set_paused(paused);
  change->set_all(all);
  if (all) {
    for (const TopicConfig& t : config_.topics) {
      absl::StatusOr<std::vector<int32_t>> ids = SelectPartitions(t.name, {});
      if (!ids.ok()) return ids.status();
      for (int32_t p : *ids) selected->push_back({t.name, p});
    }
  } else {
    absl::StatusOr<std::vector<int32_t>> ids = SelectPartitions(topic, partitions);
    if (!ids.ok()) return ids.status();
    change->set_topic(topic);
    for (int32_t p : partitions) change->add_partitions(p);
    for (int32_t p : *ids) selected->push_back({topic, p});
  }
  // Answer once the owners of the selected partitions applied it (each
  // acknowledges in the control topic); an unowned partition (a rebalance
  // under way) gets it from its next owner, before any fetch.
  change->set_ack_until_ms(absl::ToUnixMillis(absl::Now() + kPauseAckWait));
  record.set_command_id(control_->NewCommandId());
  const std::string command_id = record.command_id();
  absl::StatusOr<int64_t> offset = control_->Append(std::move(record), kAppendTimeout);
  if (!offset.ok()) return offset.status();
  const std::vector<ControlLog::AppliedResult> acks =
      control_->WaitForResults(command_id, selected->size(), kPauseAckWait);
  if (acks.size() < selected->size()) {
    LogWarn("control", verb, " recorded; ", acks.size(), " of ", selected->size(),
            " partitions acknowledged by their owners within ",
            absl::FormatDuration(kPauseAckWait), " (the rest apply it when assigned)");
  }
  LogInfo("control", verb, " ", all ? std::string("all") : topic,
          partitions.empty() ? "" : absl::StrCat("/", absl::StrJoin(partitions, ",")),
          " (control offset ", *offset, ")");
  return *offset;
}

template <typename Request, typename Response>
grpc::Status ControlService::PauseOrResume(bool paused, const grpc::ServerContextBase& context,
                                           const Request& request, Response* response) {
  if (absl::Status auth = Authorize(context); !auth.ok()) return ToGrpcStatus(auth);
  std::vector<TopicPartition> selected;
  absl::StatusOr<int64_t> offset =
      ChangePause(paused, request.all(), request.topic(),
                  {request.partitions().begin(), request.partitions().end()}, &selected);
  if (!offset.ok()) return ToGrpcStatus(offset.status());
  for (const TopicPartition& tp : selected) {
    v1::PartitionRef* ref = response->add_partitions();
    ref->set_topic(tp.topic);
    ref->set_partition(tp.partition);
  }
  response->set_control_offset(*offset);
  return grpc::Status::OK;
}

grpc::Status ControlService::Pause(grpc::ServerContextBase* context, const v1::PauseRequest* request,
                                   v1::PauseResponse* response) {
  return PauseOrResume(/*paused=*/true, *context, *request, response);
}

grpc::Status ControlService::Resume(grpc::ServerContextBase* context,
                                    const v1::ResumeRequest* request,
                                    v1::ResumeResponse* response) {
  return PauseOrResume(/*paused=*/false, *context, *request, response);
}

absl::StatusOr<int64_t> ControlService::ResetTargetOffset(const v1::ResetOffsetsRequest& request,
                                                          const TopicPartition& tp,
                                                          int64_t earliest, int64_t end) {
  switch (request.to_case()) {
    case v1::ResetOffsetsRequest::kToEarliest:
      return earliest;
    case v1::ResetOffsetsRequest::kToLatest:
      return end;
    case v1::ResetOffsetsRequest::kToOffset:
      if (request.to_offset() > end) {
        return absl::InvalidArgumentError(
            absl::StrCat("offset ", request.to_offset(), " is beyond the end of ", tp.ToString(),
                         " (end offset ", end, "); use an offset up to the end, or to_latest"));
      }
      if (request.to_offset() < earliest) {
        return absl::InvalidArgumentError(
            absl::StrCat("offset ", request.to_offset(), " of ", tp.ToString(),
                         " was deleted (earliest offset ", earliest, "); use to_earliest"));
      }
      return request.to_offset();
    case v1::ResetOffsetsRequest::kToTimestampMs: {
      absl::StatusOr<int64_t> offset =
          control_->OffsetForTimestamp(tp, request.to_timestamp_ms(), kKafkaTimeout);
      if (!offset.ok()) return offset.status();
      return *offset < 0 ? end : *offset;  // no record at or after it: the end
    }
    case v1::ResetOffsetsRequest::TO_NOT_SET:
      break;
  }
  return 0;  // CheckResetRequest refused it already
}

absl::Status ControlService::PlanReset(const v1::ResetOffsetsRequest& request,
                                       const TopicPartition& tp,
                                       const std::map<TopicPartition, int64_t>& committed,
                                       v1::ResetOffsetsResponse* response,
                                       v1::internal::ResetCommand* reset) {
  absl::StatusOr<std::pair<int64_t, int64_t>> marks = control_->Watermarks(tp, kKafkaTimeout);
  if (!marks.ok()) return marks.status();
  const auto [earliest, end] = *marks;
  absl::StatusOr<int64_t> target = ResetTargetOffset(request, tp, earliest, end);
  if (!target.ok()) return target.status();
  v1::PartitionReset* planned = response->add_partitions();
  planned->set_topic(tp.topic);
  planned->set_partition(tp.partition);
  planned->set_current_offset(committed.count(tp) ? committed.at(tp) : -1);
  planned->set_new_offset(*target);
  planned->set_earliest_offset(earliest);
  planned->set_end_offset(end);
  v1::internal::ResetTarget* reset_target = reset->add_targets();
  reset_target->set_topic(tp.topic);
  reset_target->set_partition(tp.partition);
  reset_target->set_offset(*target);
  return absl::OkStatus();
}

absl::Status ControlService::Reset(const v1::ResetOffsetsRequest& request,
                                   v1::ResetOffsetsResponse* response) {
  if (absl::Status valid = CheckResetRequest(request, absl::Now()); !valid.ok()) return valid;
  absl::StatusOr<std::vector<int32_t>> ids = SelectPartitions(
      request.topic(), {request.partitions().begin(), request.partitions().end()});
  if (!ids.ok()) return ids.status();

  std::vector<TopicPartition> partitions;
  for (int32_t p : *ids) partitions.push_back({request.topic(), p});
  absl::StatusOr<std::map<TopicPartition, int64_t>> committed =
      consumer_->Committed(partitions, kKafkaTimeout);
  if (!committed.ok()) return committed.status();

  v1::internal::ControlLogRecord record;
  for (const TopicPartition& tp : partitions) {
    if (absl::Status planned = PlanReset(request, tp, *committed, response, record.mutable_reset());
        !planned.ok()) {
      return planned;
    }
  }
  response->set_dry_run(request.dry_run());
  if (request.dry_run()) {
    response->set_control_offset(-1);
    return absl::OkStatus();
  }
  record.set_command_id(control_->NewCommandId());
  const std::string command_id = record.command_id();
  absl::StatusOr<int64_t> offset = control_->Append(std::move(record), kAppendTimeout);
  if (!offset.ok()) return offset.status();
  response->set_control_offset(*offset);
  LogInfo("control", "reset of ", request.topic(), " recorded (command ", command_id,
          ", control offset ", *offset, ")");
  MarkApplied(control_->WaitForResults(command_id, partitions.size(),
                                       WaitFrom(request.wait_ms(), kDefaultResetWait)),
              response);
  return absl::OkStatus();
}

grpc::Status ControlService::ResetOffsets(grpc::ServerContextBase* context,
                                          const v1::ResetOffsetsRequest* request,
                                          v1::ResetOffsetsResponse* response) {
  if (absl::Status auth = Authorize(*context); !auth.ok()) return ToGrpcStatus(auth);
  return ToGrpcStatus(Reset(*request, response));
}

absl::Status ControlService::Skip(const v1::SkipOffsetRequest& request,
                                  v1::SkipOffsetResponse* response) {
  if (request.topic().empty()) {
    return absl::InvalidArgumentError("empty request: set topic, partition and offset");
  }
  if (request.offset() < 0) return absl::InvalidArgumentError("offset must not be negative");
  absl::StatusOr<std::vector<int32_t>> ids = SelectPartitions(request.topic(), {request.partition()});
  if (!ids.ok()) return ids.status();
  const TopicPartition tp{request.topic(), request.partition()};
  absl::StatusOr<std::pair<int64_t, int64_t>> marks = control_->Watermarks(tp, kKafkaTimeout);
  if (!marks.ok()) return marks.status();
  if (request.offset() >= marks->second) {
    return absl::InvalidArgumentError(absl::StrCat("offset ", request.offset(),
                                                   " is beyond the end of ", tp.ToString(),
                                                   " (end offset ", marks->second, ")"));
  }
  const absl::Duration wait = WaitFrom(request.wait_ms(), kDefaultSkipWait);
  v1::internal::ControlLogRecord record;
  record.set_command_id(control_->NewCommandId());
  const std::string command_id = record.command_id();
  v1::internal::SkipCommand* skip = record.mutable_skip();
  skip->set_topic(tp.topic);
  skip->set_partition(tp.partition);
  skip->set_offset(request.offset());
  skip->set_expires_at_ms(absl::ToUnixMillis(absl::Now() + wait));
  absl::StatusOr<int64_t> offset = control_->Append(std::move(record), kAppendTimeout);
  if (!offset.ok()) return offset.status();
  const std::vector<ControlLog::AppliedResult> results =
      control_->WaitForResults(command_id, 1, wait);
  if (results.empty()) {
    return absl::UnavailableError(
        absl::StrCat("no replica that owns ", tp.ToString(), " answered within ",
                     absl::FormatDuration(wait),
                     " (is it assigned? see GetStatus; a rebalance may be under way: retry)"));
  }
  const ControlLog::AppliedResult& result = results.front();
  if (!result.result.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat(result.result.error(), " (answered by ", result.applied_by, ")"));
  }
  response->set_outcome(result.result.outcome());
  response->set_applied_by(result.applied_by);
  return absl::OkStatus();
}

grpc::Status ControlService::SkipOffset(grpc::ServerContextBase* context,
                                        const v1::SkipOffsetRequest* request,
                                        v1::SkipOffsetResponse* response) {
  if (absl::Status auth = Authorize(*context); !auth.ok()) return ToGrpcStatus(auth);
  return ToGrpcStatus(Skip(*request, response));
}

absl::Status ControlService::RateLimit(const v1::SetRateLimitRequest& request,
                                       v1::SetRateLimitResponse* response) {
  absl::StatusOr<v1::internal::RateLimitChange> change = RateLimitChangeFor(config_, request);
  if (!change.ok()) return change.status();
  // State, like a pause, but for every replica rather than a partition's
  // owner: no acknowledgements to wait for. The append returns once every
  // in-sync replica of the control topic has it (it outlives this replica);
  // waiting until this replica has read it back means that a GetStatus here
  // right after sees it applied as soon as the poll thread picks it up.
  v1::internal::ControlLogRecord record;
  record.set_command_id(control_->NewCommandId());
  *record.mutable_rate_limit() = *std::move(change);
  absl::StatusOr<int64_t> offset = control_->Append(std::move(record), kAppendTimeout);
  if (!offset.ok()) return offset.status();
  if (absl::Status read = control_->WaitRead(*offset + 1, kAppendTimeout); !read.ok()) {
    LogWarn("control", "rate limit recorded at control offset ", *offset,
            " but not read back here yet: ", read.ToString());
  }
  response->set_control_offset(*offset);
  LogInfo("control", "rate limit of ", request.processor(), ": ", DescribeRateLimit(request),
          " (control offset ", *offset, ")");
  return absl::OkStatus();
}

grpc::Status ControlService::SetRateLimit(grpc::ServerContextBase* context,
                                          const v1::SetRateLimitRequest* request,
                                          v1::SetRateLimitResponse* response) {
  if (absl::Status auth = Authorize(*context); !auth.ok()) return ToGrpcStatus(auth);
  return ToGrpcStatus(RateLimit(*request, response));
}

void ControlService::Status(v1::GetStatusResponse* response) {
  const EngineSnapshot snapshot = engine_->Snapshot();
  const std::map<TopicPartition, PartitionFetchState> fetch = consumer_->FetchStates();
  const absl::Time now = absl::Now();
  auto client_id = config_.kafka.find("client.id");
  response->set_replica(client_id != config_.kafka.end() ? client_id->second : control_->replica());
  auto group = config_.kafka.find("group.id");
  response->set_group_id(group != config_.kafka.end() ? group->second : "");
  // The group's committed offsets, for partitions this replica has not
  // committed in its current assignment yet (just assigned, idle).
  std::vector<TopicPartition> not_committed_here;
  for (const PartitionSnapshot& partition : snapshot.partitions) {
    if (!partition.last_committed.has_value()) not_committed_here.push_back(partition.partition);
  }
  std::map<TopicPartition, int64_t> group_committed;
  if (!not_committed_here.empty()) {
    absl::StatusOr<std::map<TopicPartition, int64_t>> read =
        consumer_->Committed(not_committed_here, kKafkaTimeout);
    if (read.ok()) group_committed = *std::move(read);
  }
  for (const PartitionSnapshot& partition : snapshot.partitions) {
    v1::PartitionStatus* status = response->add_partitions();
    status->set_topic(partition.partition.topic);
    status->set_partition(partition.partition.partition);
    std::optional<int64_t> committed = partition.last_committed;
    if (!committed.has_value()) {
      auto it = group_committed.find(partition.partition);
      if (it != group_committed.end() && it->second >= 0) committed = it->second;
    }
    status->set_committed_offset(committed.value_or(-1));
    auto state = fetch.find(partition.partition);
    const int64_t end = state != fetch.end() ? state->second.high_watermark : -1;
    status->set_end_offset(end);
    // Lag from the position ferry would commit now (else the last commit).
    std::optional<int64_t> position = partition.commit_offset;
    if (!position.has_value()) position = committed;
    if (!position.has_value()) position = partition.start_offset;
    status->set_lag(end >= 0 && position.has_value() ? std::max<int64_t>(0, end - *position) : -1);
    status->set_in_flight(partition.in_flight);
    status->set_buffered(partition.buffered);
    status->set_lowest_unfinished_offset(partition.lowest_unfinished.value_or(-1));
    status->set_blocked_for_ms(partition.oldest_unfinished_since.has_value()
                                   ? absl::ToInt64Milliseconds(
                                         now - *partition.oldest_unfinished_since)
                                   : 0);
    status->set_paused(partition.paused);
    status->set_fetch_paused(state != fetch.end() && state->second.paused);
    status->set_blocked(partition.blocked);
  }
  for (const StreamSnapshot& stream : snapshot.streams) {
    v1::WorkerStatus* worker = response->add_workers();
    if (stream.processor >= 0 &&
        static_cast<size_t>(stream.processor) < config_.processors.size()) {
      worker->set_processor(config_.processors[static_cast<size_t>(stream.processor)].name);
    }
    worker->set_stream_id(stream.id);
    worker->set_ready(stream.ready);
    worker->set_credit(stream.credit);
    worker->set_in_flight(stream.in_flight);
    worker->set_worker_name(stream.worker_name);
  }
  response->set_lanes_in_use(static_cast<int32_t>(snapshot.lanes_in_use));
  response->set_lane_count(config_.lane_count);
  response->set_buffered_events(snapshot.buffered_events);
  response->set_buffered_bytes(snapshot.buffered_bytes);
  for (const std::string& command : control_->PauseCommands()) {
    response->add_pause_commands(command);
  }
  status_metrics_.Fill(snapshot, now, response);
}

grpc::Status ControlService::GetStatus(grpc::ServerContextBase* context,
                                       const v1::GetStatusRequest* /*request*/,
                                       v1::GetStatusResponse* response) {
  if (absl::Status auth = Authorize(*context); !auth.ok()) return ToGrpcStatus(auth);
  Status(response);
  return grpc::Status::OK;
}

}  // namespace ferry
