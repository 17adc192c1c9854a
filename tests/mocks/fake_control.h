// FakeControl: ferry's Control gRPC service (proto/ferry/v1/control.proto)
// answering what the test set and keeping what it was sent; and
// FakeControlTest, a gtest fixture that serves one on 127.0.0.1 (any free
// port) and runs the real ferryctl binary against it. Shared by ferryctl's
// tests (clients/ferryctl/ferryctl_test.cc, ferryctl_rate_limit_test.cc).
//
// Threading: gRPC's server threads call the handlers; everything the test
// reads or sets is under `mu`. The test sets the answers before running
// ferryctl and reads what was sent after it exited (RunFerryctl waits), so
// nothing needs polling.
#ifndef FERRY_TESTS_MOCKS_FAKE_CONTROL_H_
#define FERRY_TESTS_MOCKS_FAKE_CONTROL_H_

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "ferry/v1/control.grpc.pb.h"
#include "gtest/gtest.h"
#include "tests/tools/ferryctl_runner.h"

namespace ferry::testing {

class FakeControl final : public v1::Control::Service {
 public:
  // What every call answers; `error` (when not OK) replaces the response.
  struct Answers {
    grpc::Status error = grpc::Status::OK;
    v1::PauseResponse pause_response;
    v1::ResumeResponse resume_response;
    v1::ResetOffsetsResponse reset_response;
    v1::GetStatusResponse status_response;
    std::vector<v1::GetStatusResponse> status_responses;  // answered first, in turn
    v1::SkipOffsetResponse skip_response;
    v1::SetRateLimitResponse rate_limit_response;
  };

  grpc::Status Pause(grpc::ServerContext* context, const v1::PauseRequest* request,
                     v1::PauseResponse* response) override;
  grpc::Status Resume(grpc::ServerContext* context, const v1::ResumeRequest* request,
                      v1::ResumeResponse* response) override;
  grpc::Status ResetOffsets(grpc::ServerContext* context, const v1::ResetOffsetsRequest* request,
                            v1::ResetOffsetsResponse* response) override;
  grpc::Status GetStatus(grpc::ServerContext* context, const v1::GetStatusRequest* request,
                         v1::GetStatusResponse* response) override;
  grpc::Status SkipOffset(grpc::ServerContext* context, const v1::SkipOffsetRequest* request,
                          v1::SkipOffsetResponse* response) override;
  grpc::Status SetRateLimit(grpc::ServerContext* context, const v1::SetRateLimitRequest* request,
                            v1::SetRateLimitResponse* response) override;

  // Calls `set(answers)` under `mu`. The answers are one guarded struct, so
  // a lambda can set its fields without naming the lock (which the
  // thread-safety analysis cannot see through a lambda).
  template <typename F>
  void Configure(F set) ABSL_LOCKS_EXCLUDED(mu) {
    absl::MutexLock lock(&mu);
    set(answers);
  }

  absl::Mutex mu;
  Answers answers ABSL_GUARDED_BY(mu);
  // The methods called, in order, and each call's authorization metadata
  // ("" when absent).
  std::vector<std::string> calls ABSL_GUARDED_BY(mu);
  std::vector<std::string> authorizations ABSL_GUARDED_BY(mu);
  std::vector<v1::PauseRequest> pause_requests ABSL_GUARDED_BY(mu);
  std::vector<v1::ResumeRequest> resume_requests ABSL_GUARDED_BY(mu);
  std::vector<v1::ResetOffsetsRequest> reset_requests ABSL_GUARDED_BY(mu);
  std::vector<v1::SkipOffsetRequest> skip_requests ABSL_GUARDED_BY(mu);
  std::vector<v1::SetRateLimitRequest> rate_limit_requests ABSL_GUARDED_BY(mu);

 private:
  void Record(const std::string& method, const grpc::ServerContext& context)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // Records the call and `request` (into `sent`), copies `answer` to
  // `response` and returns answers.error: every handler but GetStatus.
  template <typename Request, typename Response>
  grpc::Status Answer(const std::string& method, const grpc::ServerContext& context,
                      const Request& request, std::vector<Request>& sent, const Response& answer,
                      Response* response) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
};

// A FakeControl served in plaintext from SetUp (StartServer serves it again
// with other credentials), and ferryctl run against it.
class FakeControlTest : public ::testing::Test {
 protected:
  void SetUp() override;
  void TearDown() override;

  // Serves `fake_` on a new port (the server started before stops first).
  void StartServer(std::shared_ptr<grpc::ServerCredentials> credentials);

  // "--server=127.0.0.1:PORT" of the current server.
  std::string Server() const;

  // Runs ferryctl with `args` (and `env` added to a copy of this process's
  // environment without FERRY_CONTROL_TOKEN) and waits for it to exit; its
  // output goes to files in TEST_TMPDIR.
  FerryctlOutcome Ferryctl(const std::vector<std::string>& args,
                           const std::vector<std::string>& env = {});

  // The methods called so far.
  std::vector<std::string> Calls();

  // $TEST_TMPDIR/`name` (/tmp outside Bazel).
  static std::string TempPath(const std::string& name);

  FakeControl fake_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
};

}  // namespace ferry::testing

// An exit code check that prints ferryctl's output when it fails.
#define EXPECT_EXIT_CODE(run, code) \
  EXPECT_EQ((run).exit_code, code) << "stdout:\n" << (run).out << "stderr:\n" << (run).err

#endif  // FERRY_TESTS_MOCKS_FAKE_CONTROL_H_
