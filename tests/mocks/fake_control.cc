#include "tests/mocks/fake_control.h"

#include <cstdlib>

#include "absl/strings/str_cat.h"

namespace ferry::testing {
namespace {

// The real binary, a data dependency of the test.
constexpr char kFerryctl[] = "clients/ferryctl/ferryctl";

}  // namespace

void FakeControl::Record(const std::string& method, const grpc::ServerContext& context) {
  calls.push_back(method);
  const auto& metadata = context.client_metadata();
  auto it = metadata.find("authorization");
  authorizations.push_back(it == metadata.end() ? ""
                                                : std::string(it->second.data(), it->second.size()));
}

template <typename Request, typename Response>
grpc::Status FakeControl::Answer(const std::string& method, const grpc::ServerContext& context,
                                 const Request& request, std::vector<Request>& sent,
                                 const Response& answer, Response* response) {
  Record(method, context);
  sent.push_back(request);
  *response = answer;
  return answers.error;
}

grpc::Status FakeControl::Pause(grpc::ServerContext* context, const v1::PauseRequest* request,
                                v1::PauseResponse* response) {
  absl::MutexLock lock(&mu);
  return Answer("Pause", *context, *request, pause_requests, answers.pause_response, response);
}

grpc::Status FakeControl::Resume(grpc::ServerContext* context, const v1::ResumeRequest* request,
                                 v1::ResumeResponse* response) {
  absl::MutexLock lock(&mu);
  return Answer("Resume", *context, *request, resume_requests, answers.resume_response, response);
}

grpc::Status FakeControl::ResetOffsets(grpc::ServerContext* context,
                                       const v1::ResetOffsetsRequest* request,
                                       v1::ResetOffsetsResponse* response) {
  absl::MutexLock lock(&mu);
  return Answer("ResetOffsets", *context, *request, reset_requests, answers.reset_response,
                response);
}

grpc::Status FakeControl::GetStatus(grpc::ServerContext* context,
                                    const v1::GetStatusRequest* /*request*/,
                                    v1::GetStatusResponse* response) {
  absl::MutexLock lock(&mu);
  Record("GetStatus", *context);
  std::vector<v1::GetStatusResponse>& queued = answers.status_responses;
  *response = queued.empty() ? answers.status_response : queued.front();
  if (!queued.empty()) queued.erase(queued.begin());
  return answers.error;
}

grpc::Status FakeControl::SkipOffset(grpc::ServerContext* context,
                                     const v1::SkipOffsetRequest* request,
                                     v1::SkipOffsetResponse* response) {
  absl::MutexLock lock(&mu);
  return Answer("SkipOffset", *context, *request, skip_requests, answers.skip_response, response);
}

grpc::Status FakeControl::SetRateLimit(grpc::ServerContext* context,
                                       const v1::SetRateLimitRequest* request,
                                       v1::SetRateLimitResponse* response) {
  absl::MutexLock lock(&mu);
  return Answer("SetRateLimit", *context, *request, rate_limit_requests,
                answers.rate_limit_response, response);
}

void FakeControlTest::SetUp() { StartServer(grpc::InsecureServerCredentials()); }

void FakeControlTest::TearDown() {
  if (server_ != nullptr) server_->Shutdown();
}

void FakeControlTest::StartServer(std::shared_ptr<grpc::ServerCredentials> credentials) {
  if (server_ != nullptr) server_->Shutdown();
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0", credentials, &port_);
  builder.RegisterService(&fake_);
  server_ = builder.BuildAndStart();
  ASSERT_NE(server_, nullptr);
  ASSERT_GT(port_, 0);
}

std::string FakeControlTest::Server() const { return absl::StrCat("--server=127.0.0.1:", port_); }

FerryctlOutcome FakeControlTest::Ferryctl(const std::vector<std::string>& args,
                                          const std::vector<std::string>& env) {
  static int runs = 0;  // each run's output files get their own name
  return RunFerryctl(kFerryctl, args, env, TempPath(absl::StrCat("ferryctl.", ++runs)));
}

std::vector<std::string> FakeControlTest::Calls() {
  absl::MutexLock lock(&fake_.mu);
  return fake_.calls;
}

std::string FakeControlTest::TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return absl::StrCat(dir != nullptr ? dir : "/tmp", "/", name);
}

}  // namespace ferry::testing
