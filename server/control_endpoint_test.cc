// ControlEndpoint over a real gRPC server on loopback with a fake handler:
// what the handler returns reaches the client, a blocking call does not hold
// up the others, the backlog is bounded, and Stop answers what waits.
#include "server/control_endpoint.h"

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "ferry/v1/control.grpc.pb.h"
#include "gtest/gtest.h"
#include "server/control_handler.h"

namespace ferry {
namespace {

// Pause blocks until `release_pause`; GetStatus answers at once and
// remembers the authorization metadata; SetRateLimit is NOT_FOUND.
class FakeHandler final : public ControlHandler {
 public:
  grpc::Status Pause(grpc::ServerContextBase*, const v1::PauseRequest* request,
                     v1::PauseResponse* response) override {
    pauses_started.fetch_add(1);
    release_pause.WaitForNotification();
    response->set_control_offset(static_cast<int64_t>(request->partitions_size()) + 40);
    return grpc::Status::OK;
  }
  grpc::Status Resume(grpc::ServerContextBase*, const v1::ResumeRequest*,
                      v1::ResumeResponse*) override {
    return grpc::Status::OK;
  }
  grpc::Status ResetOffsets(grpc::ServerContextBase*, const v1::ResetOffsetsRequest*,
                            v1::ResetOffsetsResponse*) override {
    return grpc::Status::OK;
  }
  grpc::Status GetStatus(grpc::ServerContextBase* context, const v1::GetStatusRequest*,
                         v1::GetStatusResponse* response) override {
    auto it = context->client_metadata().find("authorization");
    absl::MutexLock l(&mu);
    if (it != context->client_metadata().end()) {
      authorization.assign(it->second.data(), it->second.size());
    }
    response->set_buffered_bytes(77);
    return grpc::Status::OK;
  }
  grpc::Status SkipOffset(grpc::ServerContextBase*, const v1::SkipOffsetRequest*,
                          v1::SkipOffsetResponse*) override {
    return grpc::Status::OK;
  }
  grpc::Status SetRateLimit(grpc::ServerContextBase*, const v1::SetRateLimitRequest*,
                            v1::SetRateLimitResponse*) override {
    return grpc::Status(grpc::StatusCode::NOT_FOUND, "no processor p");
  }

  absl::Notification release_pause;
  std::atomic<int> pauses_started{0};
  absl::Mutex mu;
  std::string authorization ABSL_GUARDED_BY(mu);
};

class ControlEndpointTest : public ::testing::Test {
 protected:
  void StartServer(int threads, int max_queued) {
    endpoint_ = std::make_unique<ControlEndpoint>(&handler_, threads, max_queued);
    endpoint_->Start();
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(endpoint_.get());
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    stub_ = v1::Control::NewStub(
        grpc::CreateChannel("127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials()));
  }
  void TearDown() override {
    if (!handler_.release_pause.HasBeenNotified()) handler_.release_pause.Notify();
    if (server_ != nullptr) server_->Shutdown(absl::ToChronoTime(absl::Now() + absl::Seconds(5)));
    if (endpoint_ != nullptr) endpoint_->Stop();
  }

  // A Pause on its own thread; its status lands in `*status`.
  std::thread PauseAsync(grpc::Status* status, v1::PauseResponse* response) {
    return std::thread([this, status, response] {
      grpc::ClientContext context;
      context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(30)));
      v1::PauseRequest request;
      request.add_partitions(1);
      request.add_partitions(2);
      *status = stub_->Pause(&context, request, response);
    });
  }
  // Waits (bounded) until `done` holds.
  static bool WaitUntil(const std::function<bool()>& done) {
    const absl::Time deadline = absl::Now() + absl::Seconds(10);
    while (!done()) {
      if (absl::Now() > deadline) return false;
      absl::SleepFor(absl::Milliseconds(1));
    }
    return true;
  }
  grpc::Status GetStatus(v1::GetStatusResponse* response, const std::string& authorization = "") {
    grpc::ClientContext context;
    if (!authorization.empty()) context.AddMetadata("authorization", authorization);
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
    return stub_->GetStatus(&context, v1::GetStatusRequest(), response);
  }

  FakeHandler handler_;
  std::unique_ptr<ControlEndpoint> endpoint_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<v1::Control::Stub> stub_;
};

TEST_F(ControlEndpointTest, ResponsesStatusesAndMetadataPassThrough) {
  StartServer(/*threads=*/2, /*max_queued=*/8);
  v1::GetStatusResponse status;
  ASSERT_TRUE(GetStatus(&status, "Bearer s3cret").ok());
  EXPECT_EQ(status.buffered_bytes(), 77);
  {
    absl::MutexLock l(&handler_.mu);
    EXPECT_EQ(handler_.authorization, "Bearer s3cret");
  }
  grpc::ClientContext context;
  v1::SetRateLimitResponse limit;
  grpc::Status refused = stub_->SetRateLimit(&context, v1::SetRateLimitRequest(), &limit);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(refused.error_message(), "no processor p");
}

TEST_F(ControlEndpointTest, ABlockedCallDoesNotHoldUpTheOthers) {
  StartServer(/*threads=*/2, /*max_queued=*/8);
  grpc::Status paused;
  v1::PauseResponse pause_response;
  std::thread pause = PauseAsync(&paused, &pause_response);
  ASSERT_TRUE(WaitUntil([&] { return handler_.pauses_started.load() == 1; }));
  v1::GetStatusResponse status;
  EXPECT_TRUE(GetStatus(&status).ok());  // answered while Pause waits
  handler_.release_pause.Notify();
  pause.join();
  ASSERT_TRUE(paused.ok()) << paused.error_message();
  EXPECT_EQ(pause_response.control_offset(), 42);
}

TEST_F(ControlEndpointTest, TheBacklogIsBoundedAndStopAnswersWhatWaits) {
  StartServer(/*threads=*/1, /*max_queued=*/1);
  grpc::Status first, second;
  v1::PauseResponse first_response, second_response;
  std::thread running = PauseAsync(&first, &first_response);
  ASSERT_TRUE(WaitUntil([&] { return handler_.pauses_started.load() == 1; }));
  std::thread waiting = PauseAsync(&second, &second_response);
  ASSERT_TRUE(WaitUntil([&] { return endpoint_->queued() == 1; }));
  v1::GetStatusResponse status;
  EXPECT_EQ(GetStatus(&status).error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);

  // Stop answers the waiting call at once; it joins once the running one ends.
  std::thread stop([this] { endpoint_->Stop(); });
  waiting.join();
  EXPECT_EQ(second.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(handler_.pauses_started.load(), 1);  // it never ran
  handler_.release_pause.Notify();
  running.join();
  stop.join();
  EXPECT_TRUE(first.ok());
  EXPECT_EQ(GetStatus(&status).error_code(), grpc::StatusCode::UNAVAILABLE);
}

}  // namespace
}  // namespace ferry
