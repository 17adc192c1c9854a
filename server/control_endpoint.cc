#include "server/control_endpoint.h"

#include <utility>

namespace ferry {

ControlEndpoint::ControlEndpoint(ControlHandler* handler, int threads, int max_queued)
    : handler_(handler),
      threads_count_(threads),
      max_queued_(static_cast<size_t>(max_queued)) {}

ControlEndpoint::~ControlEndpoint() { Stop(); }

void ControlEndpoint::Start() {
  absl::MutexLock l(&mu_);
  if (stopping_ || !threads_.empty()) return;
  for (int i = 0; i < threads_count_; ++i) threads_.emplace_back([this] { Loop(); });
}

void ControlEndpoint::Stop() {
  std::vector<std::thread> threads;
  std::deque<Call> left;
  {
    absl::MutexLock l(&mu_);
    stopping_ = true;
    threads.swap(threads_);
    left.swap(queue_);
  }
  for (Call& call : left) {
    call.reactor->Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE, "ferry is shutting down"));
  }
  for (std::thread& t : threads) t.join();
}

size_t ControlEndpoint::queued() {
  absl::MutexLock l(&mu_);
  return queue_.size();
}

void ControlEndpoint::Loop() {
  for (;;) {
    Call call;
    {
      absl::MutexLock l(&mu_);
      mu_.Await(absl::Condition(
          +[](ControlEndpoint* e) ABSL_EXCLUSIVE_LOCKS_REQUIRED(e->mu_) {
            return e->stopping_ || !e->queue_.empty();
          },
          this));
      if (queue_.empty()) return;  // stopping
      call = std::move(queue_.front());
      queue_.pop_front();
    }
    call.reactor->Finish(call.run());
  }
}

grpc::ServerUnaryReactor* ControlEndpoint::Dispatch(grpc::CallbackServerContext* context,
                                                    std::function<grpc::Status()> run) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  grpc::Status refused;
  {
    absl::MutexLock l(&mu_);
    if (stopping_ || threads_.empty()) {
      refused = grpc::Status(grpc::StatusCode::UNAVAILABLE, "ferry is shutting down");
    } else if (queue_.size() >= max_queued_) {
      refused = grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                             "too many Control calls waiting; retry later");
    } else {
      queue_.push_back(Call{reactor, std::move(run)});
      return reactor;
    }
  }
  reactor->Finish(refused);
  return reactor;
}

grpc::ServerUnaryReactor* ControlEndpoint::Pause(grpc::CallbackServerContext* context,
                                                 const v1::PauseRequest* request,
                                                 v1::PauseResponse* response) {
  return Dispatch(context, [=] { return handler_->Pause(context, request, response); });
}

grpc::ServerUnaryReactor* ControlEndpoint::Resume(grpc::CallbackServerContext* context,
                                                  const v1::ResumeRequest* request,
                                                  v1::ResumeResponse* response) {
  return Dispatch(context, [=] { return handler_->Resume(context, request, response); });
}

grpc::ServerUnaryReactor* ControlEndpoint::ResetOffsets(grpc::CallbackServerContext* context,
                                                        const v1::ResetOffsetsRequest* request,
                                                        v1::ResetOffsetsResponse* response) {
  return Dispatch(context, [=] { return handler_->ResetOffsets(context, request, response); });
}

grpc::ServerUnaryReactor* ControlEndpoint::GetStatus(grpc::CallbackServerContext* context,
                                                     const v1::GetStatusRequest* request,
                                                     v1::GetStatusResponse* response) {
  return Dispatch(context, [=] { return handler_->GetStatus(context, request, response); });
}

grpc::ServerUnaryReactor* ControlEndpoint::SkipOffset(grpc::CallbackServerContext* context,
                                                      const v1::SkipOffsetRequest* request,
                                                      v1::SkipOffsetResponse* response) {
  return Dispatch(context, [=] { return handler_->SkipOffset(context, request, response); });
}

grpc::ServerUnaryReactor* ControlEndpoint::SetRateLimit(grpc::CallbackServerContext* context,
                                                        const v1::SetRateLimitRequest* request,
                                                        v1::SetRateLimitResponse* response) {
  return Dispatch(context, [=] { return handler_->SetRateLimit(context, request, response); });
}

}  // namespace ferry
