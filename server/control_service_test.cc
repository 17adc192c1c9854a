// ControlService::SetRateLimit without a real broker: the validation at the
// edge as a pure function (RateLimitChangeFor), and the RPC handler called
// directly with a ServerContext against a ControlLog on librdkafka's mock
// cluster (the token, the record written, its fold read back). The engine
// and consumer are not involved: SetRateLimit only writes the control log.
#include "server/control_service.h"

#include <grpcpp/test/server_context_test_spouse.h>

#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "core/config/config.h"
#include "core/control/control_log.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/mocks/mock_cluster.h"

namespace ferry {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr char kToken[] = "tok-3n";
constexpr char kControlTopic[] = "ferry.control.service";

Config TwoProcessors() {
  Config config;
  ProcessorConfig slow;
  slow.name = "slow";
  ProcessorConfig fast;
  fast.name = "fast";
  config.processors = {slow, fast};
  return config;
}

v1::SetRateLimitRequest Request(const std::string& processor, double events_per_second,
                                int64_t burst = 0, bool clear = false) {
  v1::SetRateLimitRequest request;
  request.set_processor(processor);
  request.set_events_per_second(events_per_second);
  request.set_burst(burst);
  request.set_clear(clear);
  return request;
}

TEST(RateLimitChangeForTest, AcceptsRatesBurstsLiftsAndClears) {
  const Config config = TwoProcessors();
  absl::StatusOr<v1::internal::RateLimitChange> change =
      RateLimitChangeFor(config, Request("slow", 200, 20));
  ASSERT_TRUE(change.ok()) << change.status();
  EXPECT_EQ(change->processor(), "slow");
  EXPECT_EQ(change->events_per_second(), 200);
  EXPECT_EQ(change->burst(), 20);
  EXPECT_FALSE(change->clear());
  // 0 without clear: explicitly no limit. Fractions and the maximum are fine.
  EXPECT_TRUE(RateLimitChangeFor(config, Request("fast", 0)).ok());
  EXPECT_TRUE(RateLimitChangeFor(config, Request("fast", 0.25)).ok());
  EXPECT_TRUE(RateLimitChangeFor(config, Request("fast", kMaxEventsPerSecond)).ok());
  change = RateLimitChangeFor(config, Request("fast", 0, 0, /*clear=*/true));
  ASSERT_TRUE(change.ok()) << change.status();
  EXPECT_TRUE(change->clear());
}

TEST(RateLimitChangeForTest, AnUnknownProcessorIsNotFoundAndNamesTheConfiguredOnes) {
  const Config config = TwoProcessors();
  for (const char* name : {"Slow", "slow ", "nope", "slow,fast"}) {
    absl::StatusOr<v1::internal::RateLimitChange> change =
        RateLimitChangeFor(config, Request(name, 10));
    EXPECT_EQ(change.status().code(), absl::StatusCode::kNotFound) << name;
    EXPECT_THAT(change.status().message(), HasSubstr("slow, fast")) << name;
  }
  absl::StatusOr<v1::internal::RateLimitChange> empty = RateLimitChangeFor(config, Request("", 10));
  EXPECT_EQ(empty.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(empty.status().message(), HasSubstr("slow, fast"));
}

TEST(RateLimitChangeForTest, ImpossibleRatesAndBurstsAreInvalid) {
  const Config config = TwoProcessors();
  const double inf = std::numeric_limits<double>::infinity();
  for (double rate : {-1.0, -1e-9, std::nan(""), inf, -inf, kMaxEventsPerSecond * 1.0000001,
                      std::numeric_limits<double>::max(), -5.0}) {
    absl::StatusOr<v1::internal::RateLimitChange> change =
        RateLimitChangeFor(config, Request("slow", rate));
    EXPECT_EQ(change.status().code(), absl::StatusCode::kInvalidArgument) << rate;
    EXPECT_THAT(change.status().message(), HasSubstr("events_per_second")) << rate;
  }
  for (int64_t burst : {int64_t{-1}, std::numeric_limits<int64_t>::min()}) {
    absl::StatusOr<v1::internal::RateLimitChange> change =
        RateLimitChangeFor(config, Request("slow", 10, burst));
    EXPECT_EQ(change.status().code(), absl::StatusCode::kInvalidArgument) << burst;
    EXPECT_THAT(change.status().message(), HasSubstr("burst")) << burst;
  }
  // clear says "the configured limit": a rate or burst with it is a mistake.
  for (const v1::SetRateLimitRequest& request :
       {Request("slow", 10, 0, true), Request("slow", 0, 5, true),
        Request("slow", std::nan(""), 0, true), Request("slow", -1, 0, true)}) {
    absl::StatusOr<v1::internal::RateLimitChange> change = RateLimitChangeFor(config, request);
    EXPECT_EQ(change.status().code(), absl::StatusCode::kInvalidArgument)
        << request.ShortDebugString();
  }
}

class SetRateLimitTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(cluster_.ok());
    ASSERT_EQ(cluster_.CreateTopic(kControlTopic, 1), RD_KAFKA_RESP_ERR_NO_ERROR);
    config_.kafka["bootstrap.servers"] = cluster_.bootstrap();
    config_.control_topic = kControlTopic;
    absl::StatusOr<std::unique_ptr<ControlLog>> control = ControlLog::Create(config_, "here");
    ASSERT_TRUE(control.ok()) << control.status();
    control_ = std::move(*control);
    ASSERT_TRUE(control_->Start().ok());
    // SetRateLimit touches neither the engine nor the consumer.
    service_ = std::make_unique<ControlService>(config_, /*engine=*/nullptr,
                                                /*consumer=*/nullptr, control_.get(), kToken);
  }
  void TearDown() override {
    if (control_ != nullptr) control_->Stop();
  }

  grpc::Status Call(const v1::SetRateLimitRequest& request, const std::string& authorization,
                    v1::SetRateLimitResponse* response) {
    grpc::ServerContext context;
    grpc::testing::ServerContextTestSpouse spouse(&context);
    if (!authorization.empty()) spouse.AddClientMetadata("authorization", authorization);
    return service_->SetRateLimit(&context, &request, response);
  }

  std::string Limit(const std::string& processor) const {
    const std::map<std::string, RateLimitConfig> limits = control_->RateLimits();
    auto it = limits.find(processor);
    if (it == limits.end()) return "none";
    return absl::StrCat(it->second.events_per_second, "/", it->second.burst);
  }

  testing::MockCluster cluster_;
  Config config_ = TwoProcessors();
  std::unique_ptr<ControlLog> control_;
  std::unique_ptr<ControlService> service_;
};

TEST_F(SetRateLimitTest, NeedsTheTokenAndWritesNothingWithoutIt) {
  v1::SetRateLimitResponse response;
  EXPECT_EQ(Call(Request("slow", 5), "", &response).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(Call(Request("slow", 5), "Bearer wrong", &response).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(Call(Request("slow", 5), kToken, &response).error_code(),  // no "Bearer "
            grpc::StatusCode::UNAUTHENTICATED);
  ASSERT_TRUE(control_->CatchUp(absl::Seconds(30)).ok());
  EXPECT_THAT(control_->RateLimits(), IsEmpty());
}

TEST_F(SetRateLimitTest, RecordsTheLimitGroupWideAndClearsIt) {
  const std::string bearer = absl::StrCat("Bearer ", kToken);
  v1::SetRateLimitResponse response;
  grpc::Status status = Call(Request("slow", 200, 20), bearer, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  const int64_t first = response.control_offset();
  EXPECT_GE(first, 0);
  // Read back on this replica before the call returned.
  EXPECT_EQ(Limit("slow"), "200/20");
  status = Call(Request("fast", 0), bearer, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_GT(response.control_offset(), first);
  EXPECT_EQ(Limit("fast"), "0/0");  // lifted, and kept as an override
  status = Call(Request("slow", 0, 0, true), bearer, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(Limit("slow"), "none");
  EXPECT_EQ(Limit("fast"), "0/0");
}

TEST_F(SetRateLimitTest, RefusedRequestsWriteNothing) {
  const std::string bearer = absl::StrCat("Bearer ", kToken);
  v1::SetRateLimitResponse response;
  grpc::Status status = Call(Request("nope", 5), bearer, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(status.error_message(), HasSubstr("slow, fast"));
  EXPECT_EQ(Call(Request("slow", -5), bearer, &response).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(Call(Request("slow", 5, -1), bearer, &response).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(Call(Request("slow", 5, 0, true), bearer, &response).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  ASSERT_TRUE(control_->CatchUp(absl::Seconds(30)).ok());
  EXPECT_THAT(control_->RateLimits(), IsEmpty());
}

}  // namespace
}  // namespace ferry
