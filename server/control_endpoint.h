// ControlEndpoint: ferry.v1.Control on gRPC's callback API, answered by a
// ControlHandler on the endpoint's own threads.
//
// Why not gRPC's synchronous API: a server with any synchronous service runs
// a sync poller thread, and under gRPC's default epoll1 engine that thread
// shares one epoll set with everything else in the process, so it woke up
// for the worker streams' I/O (about one wake-up per 75 events at full
// speed, ~10% of ferry's CPU). Why not answer inside the callbacks: handlers
// block on Kafka round trips for seconds, and gRPC's callback threads also
// run the worker streams' reactions.
//
// Each call is queued to `threads` threads (at most `max_queued` waiting;
// beyond that, or once stopping, a call is answered RESOURCE_EXHAUSTED /
// UNAVAILABLE at once).
//
// Threading: the RPC methods are called by gRPC from any thread; Start and
// Stop by the owner (Server). Stop is idempotent and joins. Stop after the
// gRPC server has shut down: gRPC's Shutdown waits for every call it
// handed over to be finished, which these threads do.
#ifndef FERRY_SERVER_CONTROL_ENDPOINT_H_
#define FERRY_SERVER_CONTROL_ENDPOINT_H_

#include <grpcpp/grpcpp.h>

#include <deque>
#include <functional>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "ferry/v1/control.grpc.pb.h"
#include "server/control_handler.h"

namespace ferry {

class ControlEndpoint final : public v1::Control::CallbackService {
 public:
  // `handler` must outlive the endpoint.
  ControlEndpoint(ControlHandler* handler, int threads, int max_queued);
  ~ControlEndpoint() override;  // Stop()

  ControlEndpoint(const ControlEndpoint&) = delete;
  ControlEndpoint& operator=(const ControlEndpoint&) = delete;

  void Start();
  // Answers the calls still queued UNAVAILABLE and joins the threads.
  void Stop();

  // Calls waiting for a thread now.
  size_t queued();

  grpc::ServerUnaryReactor* Pause(grpc::CallbackServerContext* context,
                                  const v1::PauseRequest* request,
                                  v1::PauseResponse* response) override;
  grpc::ServerUnaryReactor* Resume(grpc::CallbackServerContext* context,
                                   const v1::ResumeRequest* request,
                                   v1::ResumeResponse* response) override;
  grpc::ServerUnaryReactor* ResetOffsets(grpc::CallbackServerContext* context,
                                         const v1::ResetOffsetsRequest* request,
                                         v1::ResetOffsetsResponse* response) override;
  grpc::ServerUnaryReactor* GetStatus(grpc::CallbackServerContext* context,
                                      const v1::GetStatusRequest* request,
                                      v1::GetStatusResponse* response) override;
  grpc::ServerUnaryReactor* SkipOffset(grpc::CallbackServerContext* context,
                                       const v1::SkipOffsetRequest* request,
                                       v1::SkipOffsetResponse* response) override;
  grpc::ServerUnaryReactor* SetRateLimit(grpc::CallbackServerContext* context,
                                         const v1::SetRateLimitRequest* request,
                                         v1::SetRateLimitResponse* response) override;

 private:
  struct Call {
    grpc::ServerUnaryReactor* reactor;
    std::function<grpc::Status()> run;
  };

  // Queues `run` for a thread, which finishes the call with its status.
  grpc::ServerUnaryReactor* Dispatch(grpc::CallbackServerContext* context,
                                     std::function<grpc::Status()> run);
  void Loop();

  ControlHandler* const handler_;
  const int threads_count_;
  const size_t max_queued_;

  absl::Mutex mu_;
  std::deque<Call> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ferry

#endif  // FERRY_SERVER_CONTROL_ENDPOINT_H_
