// A worker that breaks the protocol: Results or Credit before Ready (README:
// the stream is reset), Ready twice (counted and ignored), and results with a
// status no version of the protocol defines. ferry counts it, resets the
// stream (so the worker reconnects), redelivers the events elsewhere, keeps
// running and loses nothing.
#include <grpcpp/grpcpp.h>
#include <signal.h>

#include <atomic>
#include <memory>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "ferry/v1/processor.grpc.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/e2e/e2e_support.h"

namespace ferry::testing {
namespace {

using ::testing::HasSubstr;

// One protocol mistake per stream, in turn: Ready twice and then status 42
// for every event; Results before Ready; Credit before Ready.
class BadProcessor final : public v1::Processor::Service {
 public:
  grpc::Status Process(grpc::ServerContext* /*context*/,
                       grpc::ServerReaderWriter<v1::ProcessResponse, v1::ProcessRequest>* stream)
      override {
    const int kind = streams_++ % 3;
    v1::ProcessResponse response;
    if (kind == 1) {
      v1::Result* early = response.mutable_results()->add_results();
      early->set_id(12345);
      early->set_status(v1::Result::OK);
      stream->Write(response);  // Results before Ready
      response.Clear();
    } else if (kind == 2) {
      response.mutable_credit()->set_n(1000);
      stream->Write(response);  // Credit before Ready
      response.Clear();
    }
    response.mutable_ready()->set_max_in_flight(4);
    response.mutable_ready()->set_worker_name("bad");
    stream->Write(response);
    stream->Write(response);  // Ready twice
    v1::ProcessRequest request;
    while (stream->Read(&request)) {
      if (!request.has_events()) continue;
      events_received_ += request.events().events_size();
      response.Clear();
      for (const v1::Event& event : request.events().events()) {
        v1::Result* result = response.mutable_results()->add_results();
        result->set_id(event.id());
        result->set_status(static_cast<v1::Result::Status>(42));
      }
      stream->Write(response);
    }
    return grpc::Status::OK;
  }
  int streams() const { return streams_; }
  int64_t events_received() const { return events_received_; }

 private:
  std::atomic<int> streams_{0};
  std::atomic<int64_t> events_received_{0};
};

TEST(BadWorkerTest, ProtocolErrorsResetTheStreamAndLoseNothing) {
  constexpr int kEvents = 500;
  absl::StatusOr<MockCluster> cluster = StartMockCluster("bad", 2);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  ASSERT_TRUE(Produce(cluster->bootstrap, "bad", kEvents, 50, 2).ok());

  BadProcessor bad;
  int bad_port = 0;
  std::unique_ptr<grpc::Server> server = Serve(&bad, &bad_port);
  ASSERT_NE(server, nullptr);
  absl::StatusOr<Worker> good = StartWorker("good", 16);
  ASSERT_TRUE(good.ok()) << good.status();

  absl::StatusOr<Subprocess> ferry = StartFerry(
      FerryConfig(cluster->bootstrap, "bad-group", "bad",
                  absl::StrCat("ipv4:127.0.0.1:", bad_port, ",127.0.0.1:", good->port), 4),
      "ferry-bad");
  ASSERT_TRUE(ferry.ok()) << ferry.status();
  absl::StatusOr<test_tools::GroupProgress> progress =
      WaitAllCommitted(cluster->bootstrap, "bad", "bad-group", kEvents, *ferry, absl::Seconds(120));
  ASSERT_TRUE(progress.ok()) << progress.status() << "\n" << LogTail(*ferry);
  // ferry keeps reconnecting to the bad worker: wait until it has shown each
  // mistake (polling ferry's log, with a deadline).
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  while (absl::Now() < deadline &&
         !(absl::StrContains(ferry->Log(), "(Results before Ready)") &&
           absl::StrContains(ferry->Log(), "(Credit before Ready)"))) {
    absl::SleepFor(absl::Milliseconds(50));
  }
  EXPECT_EQ(Terminate(*ferry, absl::Seconds(30)).value_or(-1), 0);
  server->Shutdown();
  ASSERT_EQ(Terminate(good->process, absl::Seconds(30)).value_or(-1), 0);

  const std::string log = ferry->Log();
  // Results or Credit before Ready reset the stream (README).
  EXPECT_THAT(log, HasSubstr("broke the protocol (Results before Ready); resetting the stream"));
  EXPECT_THAT(log, HasSubstr("broke the protocol (Credit before Ready); resetting the stream"));
  EXPECT_THAT(log, HasSubstr("sent Ready twice"));
  EXPECT_THAT(log, HasSubstr("broke the protocol (unknown result status 42)"));
  // The bad worker got events, had its streams reset and reconnected.
  EXPECT_GT(bad.events_received(), 0);
  EXPECT_GT(bad.streams(), 1);
  // Every event was acked by the good worker: none was failed or lost.
  EXPECT_EQ(LastProgressValue(log, "acked"), kEvents);
  EXPECT_EQ(LastProgressValue(log, "failed"), 0);
  EXPECT_GT(LastProgressValue(log, "redelivered"), 0);
}

}  // namespace
}  // namespace ferry::testing
