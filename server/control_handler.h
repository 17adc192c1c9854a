// ControlHandler: the six ferry.v1.Control calls as plain blocking functions,
// the seam between the gRPC endpoint that receives them (ControlEndpoint)
// and the service that answers them (ControlService), so the endpoint's
// threading is tested without Kafka.
//
// Threading: the endpoint calls these from its own threads, several calls at
// once; implementations must be thread-safe and may block (bounded).
#ifndef FERRY_SERVER_CONTROL_HANDLER_H_
#define FERRY_SERVER_CONTROL_HANDLER_H_

#include <grpcpp/grpcpp.h>

#include "ferry/v1/control.pb.h"

namespace ferry {

class ControlHandler {
 public:
  virtual ~ControlHandler() = default;

  virtual grpc::Status Pause(grpc::ServerContextBase* context, const v1::PauseRequest* request,
                             v1::PauseResponse* response) = 0;
  virtual grpc::Status Resume(grpc::ServerContextBase* context, const v1::ResumeRequest* request,
                              v1::ResumeResponse* response) = 0;
  virtual grpc::Status ResetOffsets(grpc::ServerContextBase* context,
                                    const v1::ResetOffsetsRequest* request,
                                    v1::ResetOffsetsResponse* response) = 0;
  virtual grpc::Status GetStatus(grpc::ServerContextBase* context,
                                 const v1::GetStatusRequest* request,
                                 v1::GetStatusResponse* response) = 0;
  virtual grpc::Status SkipOffset(grpc::ServerContextBase* context,
                                  const v1::SkipOffsetRequest* request,
                                  v1::SkipOffsetResponse* response) = 0;
  virtual grpc::Status SetRateLimit(grpc::ServerContextBase* context,
                                    const v1::SetRateLimitRequest* request,
                                    v1::SetRateLimitResponse* response) = 0;
};

}  // namespace ferry

#endif  // FERRY_SERVER_CONTROL_HANDLER_H_
