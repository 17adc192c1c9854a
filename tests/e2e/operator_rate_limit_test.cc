// An operator changes a processor's rate limit while ferry runs (issue 21),
// with the real ferryctl binary against the ferry binary, an example worker
// and the mock cluster:
//   * `ferryctl rate-limit default 20 --burst=1` on a processor without any
//     rate_limit, while a backlog is being worked through: `ferryctl status`
//     and GetStatus show 20/s set by an operator, and the worker then
//     handles about 20 events/s;
//   * `ferryctl rate-limit default --clear` lifts it and the rest of the
//     backlog drains quickly, every offset committed;
//   * an unknown processor is NOT_FOUND naming the configured processors,
//     and a negative rate is refused (by ferryctl, and by ferry when a
//     client sends it anyway) without changing the limit in force.
#include <grpcpp/grpcpp.h>
#include <time.h>

#include <algorithm>
#include <cstdint>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "ferry/v1/control.grpc.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/e2e/e2e_support.h"
#include "tests/tools/kafka_admin.h"

namespace ferry::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kTopic[] = "operated";
constexpr char kGroup[] = "operated-group";
constexpr char kToken[] = "rate-token";
constexpr int kPartitions = 4;
// The worker does about 1000 events/s (4 handler threads x 4 ms), so the
// unlimited drain takes ~6 s: long enough that the limit lands with most of
// the backlog still there, short enough that the drain after --clear is
// quick (at 20/s it would take five minutes).
constexpr int kEvents = 6000;
constexpr int kRate = 20;
constexpr absl::Duration kMeasure = absl::Seconds(3);

int64_t MonotonicNowNs() {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);  // the clock of the worker's record
  return static_cast<int64_t>(now.tv_sec) * 1000000000 + now.tv_nsec;
}

struct Outcome {
  int exit = -1;
  std::string output;  // stdout and stderr
};

class OperatorRateLimitTest : public ::testing::Test {
 protected:
  // ferryctl `args` against ferry's Control port, with the token file.
  Outcome Ferryctl(const std::vector<std::string>& args) {
    std::vector<std::string> argv = {"clients/ferryctl/ferryctl"};
    argv.insert(argv.end(), args.begin(), args.end());
    argv.push_back(absl::StrCat("--server=127.0.0.1:", port_));
    argv.push_back("--token_file=" + token_file_);
    Outcome outcome;
    absl::StatusOr<Subprocess> ctl =
        Subprocess::Start(argv, TempPath(absl::StrCat("ferryctl-", ++calls_, ".log")));
    if (!ctl.ok()) {
      outcome.output = ctl.status().ToString();
      return outcome;
    }
    outcome.exit = ctl->Wait(absl::Seconds(30)).value_or(-1);
    outcome.output = ctl->Log();
    return outcome;
  }

  absl::StatusOr<v1::ProcessorStatus> Processor() {
    absl::StatusOr<v1::GetStatusResponse> status = GetFerryStatus(port_, kToken);
    if (!status.ok()) return status.status();
    if (status->processors_size() != 1) return absl::NotFoundError("no processor in GetStatus");
    return status->processors(0);
  }

  // The worker's record so far (written through with --record_flush).
  std::vector<HandledEvent> Handled() {
    absl::StatusOr<std::vector<HandledEvent>> read = ReadHandledEvents(worker_->record_path);
    EXPECT_TRUE(read.ok()) << read.status();
    return read.ok() ? *std::move(read) : std::vector<HandledEvent>();
  }

  // Polls the record until the worker has started an event at or after
  // `until_ns`; the record then.
  std::vector<HandledEvent> HandledThrough(int64_t until_ns, absl::Duration timeout) {
    std::vector<HandledEvent> handled;
    PollUntil(
        [&] {
          handled = Handled();
          return ferry_->TryWait().has_value() ||
                 std::any_of(handled.begin(), handled.end(),
                             [&](const HandledEvent& e) { return e.monotonic_ns >= until_ns; });
        },
        timeout);
    return handled;
  }

  // SetRateLimit sent straight to ferry, bypassing ferryctl's own checks.
  grpc::Status SetRateLimitDirectly(const v1::SetRateLimitRequest& request) {
    auto stub = v1::Control::NewStub(grpc::CreateChannel(absl::StrCat("127.0.0.1:", port_),
                                                         grpc::InsecureChannelCredentials()));
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
    context.AddMetadata("authorization", absl::StrCat("Bearer ", kToken));
    v1::SetRateLimitResponse response;
    return stub->SetRateLimit(&context, request, &response);
  }

  int port_ = -1;
  int calls_ = 0;
  std::string token_file_;
  std::optional<Worker> worker_;
  std::optional<Subprocess> ferry_;
};

int64_t CountIn(const std::vector<HandledEvent>& handled, int64_t from_ns, int64_t to_ns) {
  return std::count_if(handled.begin(), handled.end(), [&](const HandledEvent& e) {
    return e.monotonic_ns >= from_ns && e.monotonic_ns < to_ns;
  });
}

TEST_F(OperatorRateLimitTest, FerryctlSetsShowsEnforcesAndClearsARateLimitAtRunTime) {
  absl::StatusOr<MockCluster> cluster = StartMockCluster(kTopic, kPartitions);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  ASSERT_TRUE(Produce(cluster->bootstrap, kTopic, kEvents, 1000, kPartitions).ok());
  absl::StatusOr<Worker> worker = StartWorker(
      kTopic, 16, 0, {"--record_flush", "--work_us=4000", "--handler_threads=4"});
  ASSERT_TRUE(worker.ok()) << worker.status();
  worker_ = *std::move(worker);
  token_file_ = TempPath("control-token");
  WriteFile(token_file_, absl::StrCat(kToken, "\n"));
  // No rate_limit in the config.
  absl::StatusOr<Subprocess> ferry =
      StartFerry(FerryConfig(cluster->bootstrap, kGroup, kTopic, WorkerTarget(*worker_), 2,
                             absl::StrCat("control:\n  token_file: ", token_file_, "\n")),
                 "ferry-operated");
  ASSERT_TRUE(ferry.ok()) << ferry.status();
  ferry_ = *std::move(ferry);
  port_ = WaitForControlPort(*ferry_);
  ASSERT_GT(port_, 0) << LogTail(*ferry_);
  absl::StatusOr<v1::ProcessorStatus> before = Processor();
  ASSERT_TRUE(before.ok()) << before.status();
  EXPECT_EQ(before->rate_limit_events_per_second(), 0);
  EXPECT_FALSE(before->rate_limit_overridden());

  // The limit lands while the backlog is being worked through.
  ASSERT_TRUE(PollUntil([&] { return !Handled().empty() || ferry_->TryWait(); },
                        absl::Seconds(30)))
      << "the worker handled nothing\n" << LogTail(*ferry_);
  const Outcome set = Ferryctl({"rate-limit", "default", absl::StrCat(kRate), "--burst=1"});
  ASSERT_EQ(set.exit, 0) << set.output;
  EXPECT_THAT(set.output, HasSubstr("rate limit of default: 20 events/s, burst 1"));

  // (1) Shown, as set by an operator: GetStatus once the engine applied it
  // (the call returns once ferry has read it back), then ferryctl status.
  absl::StatusOr<v1::ProcessorStatus> limited;
  ASSERT_TRUE(PollUntil(
      [&] { return (limited = Processor()).ok() && limited->rate_limit_overridden(); },
      absl::Seconds(10)))
      << "GetStatus never showed the operator's limit\n" << LogTail(*ferry_);
  EXPECT_EQ(limited->rate_limit_events_per_second(), kRate);
  EXPECT_EQ(limited->rate_limit_burst(), 1);
  const Outcome status = Ferryctl({"status"});
  ASSERT_EQ(status.exit, 0) << status.output;
  EXPECT_THAT(status.output, HasSubstr("20/s burst 1 (operator)"));
  EXPECT_THAT(ferry_->Log(), HasSubstr("rate limit of default: 20/s, burst 1"));

  // (2) Enforced: over the next 3 s the worker handles about 20/s. The
  // window opens half a second on, past the events the worker already held.
  const int64_t from_ns = MonotonicNowNs() + absl::ToInt64Nanoseconds(absl::Milliseconds(500));
  const int64_t to_ns = from_ns + absl::ToInt64Nanoseconds(kMeasure);
  std::vector<HandledEvent> handled = HandledThrough(to_ns, absl::Seconds(15));
  ASSERT_FALSE(ferry_->TryWait().has_value()) << "ferry exited\n" << LogTail(*ferry_);
  ASSERT_LT(handled.size(), static_cast<size_t>(kEvents))
      << "the backlog drained before the limit was measured";
  const int64_t in_window = CountIn(handled, from_ns, to_ns);
  std::cout << "at " << kRate << "/s: " << in_window << " events in " << kMeasure << ", "
            << handled.size() << " of " << kEvents << " handled so far\n";
  // 60 at exactly 20/s. (Before the bucket kept a tick's worth of slack
  // beyond its burst of 1, a token due between two 20 ms engine ticks waited
  // for the tick capped at one: about 50.) The bounds leave room for a slow
  // machine, not for a lost part of each token.
  EXPECT_GE(in_window, 54);
  EXPECT_LE(in_window, 66);

  // (4) Bad input changes nothing: an unknown processor...
  const Outcome unknown = Ferryctl({"rate-limit", "no-such-processor", "20"});
  EXPECT_EQ(unknown.exit, 1) << unknown.output;
  EXPECT_THAT(unknown.output, HasSubstr("NOT_FOUND"));
  EXPECT_THAT(unknown.output, HasSubstr("\"no-such-processor\""));
  EXPECT_THAT(unknown.output, HasSubstr("(its processors: default)"));
  // ...and a negative (or NaN, infinite, huge) rate, refused by ferryctl (a
  // usage error: nothing sent) and by ferry when a client sends it anyway.
  for (const char* rate : {"-5", "-0.5", "nan", "inf", "1e12"}) {
    const Outcome refused = Ferryctl({"rate-limit", "default", rate});
    EXPECT_EQ(refused.exit, 2) << refused.output;
    EXPECT_THAT(refused.output,
                HasSubstr(absl::StrCat("EVENTS_PER_SECOND \"", rate, "\" is not a number")));
  }
  v1::SetRateLimitRequest negative;
  negative.set_processor("default");
  negative.set_events_per_second(-5);
  EXPECT_EQ(SetRateLimitDirectly(negative).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  v1::SetRateLimitRequest negative_burst;
  negative_burst.set_processor("default");
  negative_burst.set_events_per_second(kRate);
  negative_burst.set_burst(-1);
  EXPECT_EQ(SetRateLimitDirectly(negative_burst).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  absl::StatusOr<v1::ProcessorStatus> still = Processor();
  ASSERT_TRUE(still.ok()) << still.status();
  EXPECT_EQ(still->rate_limit_events_per_second(), kRate);
  EXPECT_EQ(still->rate_limit_burst(), 1);
  EXPECT_TRUE(still->rate_limit_overridden());
  EXPECT_THAT(ferry_->Log(), Not(HasSubstr("rate limit of no-such-processor")));
  EXPECT_THAT(ferry_->Log(), Not(HasSubstr("rate limit of default: -")));

  // (3) --clear returns to the configured state (no limit): shown, and the
  // rest of the backlog drains in seconds (minutes at 20/s).
  const Outcome clear = Ferryctl({"rate-limit", "default", "--clear"});
  ASSERT_EQ(clear.exit, 0) << clear.output;
  EXPECT_THAT(clear.output, HasSubstr("back to its configured limit"));
  absl::StatusOr<v1::ProcessorStatus> cleared;
  EXPECT_TRUE(PollUntil(
      [&] { return (cleared = Processor()).ok() && !cleared->rate_limit_overridden(); },
      absl::Seconds(10)));
  EXPECT_EQ(cleared.value_or(v1::ProcessorStatus()).rate_limit_events_per_second(), 0);
  const int64_t cleared_ns = MonotonicNowNs();
  const size_t left = kEvents - Handled().size();
  absl::StatusOr<test_tools::GroupProgress> progress =
      WaitAllCommitted(cluster->bootstrap, kTopic, kGroup, kEvents, *ferry_, absl::Seconds(20));
  ASSERT_TRUE(progress.ok()) << progress.status() << "\n" << LogTail(*ferry_);
  const Outcome after = Ferryctl({"status"});
  EXPECT_EQ(after.exit, 0) << after.output;
  EXPECT_THAT(after.output, Not(HasSubstr("(operator)")));
  EXPECT_EQ(Terminate(*ferry_, absl::Seconds(30)).value_or(-1), 0) << LogTail(*ferry_);
  ASSERT_EQ(StopWorker(*worker_), 0);

  handled = Handled();
  EXPECT_EQ(handled.size(), static_cast<size_t>(kEvents)) << "every event handled once";
  int64_t last_ns = cleared_ns;
  for (const HandledEvent& e : handled) last_ns = std::max(last_ns, e.monotonic_ns);
  const double drain_s = (last_ns - cleared_ns) / 1e9;
  std::cout << "after --clear: " << left << " events in " << drain_s << " s\n";
  // At 20/s these would take left / 20 s; lifted, far less.
  EXPECT_LT(drain_s, left / (5.0 * kRate)) << left << " events left when cleared";
}

}  // namespace
}  // namespace ferry::testing
