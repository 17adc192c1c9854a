// The real ferryctl binary's `rate-limit` command against an in-process fake
// Control server on 127.0.0.1 (port 0): the request it sends, the bearer
// token, what it prints, and its exit codes (0 ok, 1 call failed, 2 usage:
// nothing sent). ferryctl runs as a subprocess and the test waits for it to
// exit; the fake answers synchronously, so there is nothing to poll.
// (ferryctl_test.cc covers the other commands; this file keeps both under
// the size limit.)

#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "ferry/v1/control.grpc.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/mocks/fake_control.h"
#include "tests/tools/ferryctl_runner.h"

namespace ferry::ferryctl {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

using Outcome = testing::FerryctlOutcome;
using testing::FakeControl;

// Serves a FakeControl whose SetRateLimit answers control offset 7; every
// run gets --server and a timeout.
class FerryctlRateLimitTest : public testing::FakeControlTest {
 protected:
  void SetUp() override {
    FakeControlTest::SetUp();
    fake_.Configure([](FakeControl::Answers& answers) {
      answers.rate_limit_response.set_control_offset(7);
    });
  }

  Outcome Ferryctl(std::vector<std::string> args, const std::vector<std::string>& env = {}) {
    args.push_back(Server());
    args.push_back("--timeout=20s");
    return FakeControlTest::Ferryctl(args, env);
  }

  std::vector<v1::SetRateLimitRequest> Requests() {
    absl::MutexLock lock(&fake_.mu);
    return fake_.rate_limit_requests;
  }
};

TEST_F(FerryctlRateLimitTest, SetsARateWithABurstAndTheToken) {
  const Outcome run =
      Ferryctl({"rate-limit", "slow", "200", "--burst=20"}, {"FERRY_CONTROL_TOKEN=s3cret"});
  EXPECT_EXIT_CODE(run, 0);
  EXPECT_EQ(run.out,
            "rate limit of slow: 200 events/s, burst 20 (control offset 7); every replica "
            "applies it as it reads the control topic\n");
  EXPECT_THAT(run.err, IsEmpty());
  const std::vector<v1::SetRateLimitRequest> sent = Requests();
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].processor(), "slow");
  EXPECT_EQ(sent[0].events_per_second(), 200);
  EXPECT_EQ(sent[0].burst(), 20);
  EXPECT_FALSE(sent[0].clear());
  absl::MutexLock lock(&fake_.mu);
  EXPECT_THAT(fake_.authorizations, ElementsAre("Bearer s3cret"));
}

TEST_F(FerryctlRateLimitTest, ClearsAndLiftsAndPrintsJson) {
  EXPECT_EXIT_CODE(Ferryctl({"rate-limit", "slow", "--clear"}), 0);
  EXPECT_EXIT_CODE(Ferryctl({"rate-limit", "fast", "0"}), 0);
  const Outcome json = Ferryctl({"rate-limit", "fast", "1.5", "--output=json"});
  EXPECT_EXIT_CODE(json, 0);
  EXPECT_THAT(json.out, HasSubstr("\"controlOffset\":\"7\""));
  const std::vector<v1::SetRateLimitRequest> sent = Requests();
  ASSERT_EQ(sent.size(), 3u);
  EXPECT_TRUE(sent[0].clear());
  EXPECT_EQ(sent[0].events_per_second(), 0);
  EXPECT_FALSE(sent[1].clear());
  EXPECT_EQ(sent[1].events_per_second(), 0);
  EXPECT_EQ(sent[2].events_per_second(), 1.5);
}

TEST_F(FerryctlRateLimitTest, UsageErrorsSendNothing) {
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"rate-limit"},
           {"rate-limit", "slow"},
           {"rate-limit", "slow", "fast"},
           {"rate-limit", "slow", "200", "300"},
           {"rate-limit", "slow", "200", "--clear"},
           {"rate-limit", "slow", "-5"},
           {"rate-limit", "slow", "200", "--burst=-1"},
           {"rate-limit", "slow", "200", "--topic=t"},
           {"status", "--burst=5"},
       }) {
    const Outcome run = Ferryctl(args);
    EXPECT_EXIT_CODE(run, 2) << ::testing::PrintToString(args);
    EXPECT_THAT(run.err, HasSubstr("usage: ferryctl")) << ::testing::PrintToString(args);
  }
  EXPECT_THAT(Requests(), IsEmpty());
}

TEST_F(FerryctlRateLimitTest, AnExtraArgumentIsTheOneNamed) {
  const Outcome run = Ferryctl({"rate-limit", "slow", "200", "300"});
  EXPECT_EXIT_CODE(run, 2);
  EXPECT_THAT(run.err, HasSubstr("unexpected argument \"300\""));
  EXPECT_THAT(Requests(), IsEmpty());
}

TEST_F(FerryctlRateLimitTest, ServerRefusalIsExitOneWithItsMessage) {
  fake_.Configure([](FakeControl::Answers& answers) {
    answers.error = grpc::Status(grpc::StatusCode::NOT_FOUND,
                                 "processor \"nope\" is not configured (its processors: slow)");
  });
  const Outcome run = Ferryctl({"rate-limit", "nope", "5"});
  EXPECT_EXIT_CODE(run, 1);
  EXPECT_EQ(run.err,
            "ferryctl: NOT_FOUND: processor \"nope\" is not configured (its processors: slow)\n");
  EXPECT_THAT(run.out, IsEmpty());
}

}  // namespace
}  // namespace ferry::ferryctl
