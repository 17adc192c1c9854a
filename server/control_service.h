// ControlService: the operators' gRPC API (ferry.v1.Control, see
// proto/ferry/v1/control.proto) on server.listen.
//
// It validates every request against the configuration and the topics'
// metadata, turns Pause/Resume/ResetOffsets/SkipOffset into records of the
// group's control topic (core/control/control_log.h) and waits for them to be read
// or applied; SetRateLimit likewise (checked against the configured
// processors); GetStatus answers from this replica's engine and consumer, and
// carries the counters /metrics serves (server/status_metrics.h).
// absl::Status becomes grpc::Status here and nowhere else.
//
// Threading: ControlEndpoint calls the handlers on its own threads, several
// at once; handlers block on Kafka round trips (bounded by timeouts), never
// on the engine's dispatch path.
#ifndef FERRY_SERVER_CONTROL_SERVICE_H_
#define FERRY_SERVER_CONTROL_SERVICE_H_

#include <grpcpp/grpcpp.h>

#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/config/config.h"
#include "core/control/control_log.h"
#include "core/engine/engine.h"
#include "core/kafka/consumer.h"
#include "ferry/v1/control.pb.h"
#include "ferry/v1/control_log.pb.h"
#include "server/control_handler.h"
#include "server/status_metrics.h"

namespace ferry {

// The one place absl::Status becomes grpc::Status (same code, same message).
grpc::Status ToGrpcStatus(const absl::Status& status);

// The control-log body of a SetRateLimit request, or why it is refused:
// NotFound (naming the configured processors) for a processor that is not
// configured; InvalidArgument for a rate that is negative, NaN, infinite or
// above kMaxEventsPerSecond, a negative burst, or clear with a rate or burst.
absl::StatusOr<v1::internal::RateLimitChange> RateLimitChangeFor(
    const Config& config, const v1::SetRateLimitRequest& request);
inline constexpr double kMaxEventsPerSecond = 1e9;

class ControlService final : public ControlHandler {
 public:
  // `token` empty: no authentication. `counters`: the metrics registry the
  // stats count in (null: GetStatus's counters stay 0). Everything must
  // outlive the service.
  ControlService(const Config& config, Engine* engine, KafkaConsumer* consumer,
                 ControlLog* control, std::string token,
                 const prometheus::Collectable* counters = nullptr);

  grpc::Status Pause(grpc::ServerContextBase* context, const v1::PauseRequest* request,
                     v1::PauseResponse* response) override;
  grpc::Status Resume(grpc::ServerContextBase* context, const v1::ResumeRequest* request,
                      v1::ResumeResponse* response) override;
  grpc::Status ResetOffsets(grpc::ServerContextBase* context, const v1::ResetOffsetsRequest* request,
                            v1::ResetOffsetsResponse* response) override;
  grpc::Status GetStatus(grpc::ServerContextBase* context, const v1::GetStatusRequest* request,
                         v1::GetStatusResponse* response) override;
  grpc::Status SkipOffset(grpc::ServerContextBase* context, const v1::SkipOffsetRequest* request,
                          v1::SkipOffsetResponse* response) override;
  grpc::Status SetRateLimit(grpc::ServerContextBase* context, const v1::SetRateLimitRequest* request,
                            v1::SetRateLimitResponse* response) override;

 private:
  absl::Status Authorize(const grpc::ServerContextBase& context) const;
  // The partitions a request names: every partition of `topic` when
  // `partitions` is empty. NotFound for a topic ferry does not consume,
  // InvalidArgument for a partition out of range.
  absl::StatusOr<std::vector<int32_t>> SelectPartitions(const std::string& topic,
                                                        const std::vector<int32_t>& partitions);
  absl::StatusOr<int64_t> ChangePause(bool paused, bool all, const std::string& topic,
                                      const std::vector<int32_t>& partitions,
                                      std::vector<TopicPartition>* selected);
  // Pause and Resume have identical request and response shapes.
  template <typename Request, typename Response>
  grpc::Status PauseOrResume(bool paused, const grpc::ServerContextBase& context,
                             const Request& request, Response* response);
  // Where `request` moves `tp`, whose offsets run from `earliest` to `end`:
  // InvalidArgument for a to_offset outside them; a timestamp after the last
  // record moves it to `end`.
  absl::StatusOr<int64_t> ResetTargetOffset(const v1::ResetOffsetsRequest& request,
                                            const TopicPartition& tp, int64_t earliest,
                                            int64_t end);
  // Plans `tp`'s reset: its watermarks, `committed` offset (-1: none) and
  // target go into `response`, the target into `reset` (the record to append).
  absl::Status PlanReset(const v1::ResetOffsetsRequest& request, const TopicPartition& tp,
                         const std::map<TopicPartition, int64_t>& committed,
                         v1::ResetOffsetsResponse* response, v1::internal::ResetCommand* reset);
  absl::Status Reset(const v1::ResetOffsetsRequest& request, v1::ResetOffsetsResponse* response);
  absl::Status Skip(const v1::SkipOffsetRequest& request, v1::SkipOffsetResponse* response);
  absl::Status RateLimit(const v1::SetRateLimitRequest& request,
                         v1::SetRateLimitResponse* response);
  void Status(v1::GetStatusResponse* response);

  const Config& config_;
  Engine* const engine_;
  KafkaConsumer* const consumer_;
  ControlLog* const control_;
  const std::string token_;
  const StatusMetrics status_metrics_;
};

}  // namespace ferry

#endif  // FERRY_SERVER_CONTROL_SERVICE_H_
