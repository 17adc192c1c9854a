// Workers outside ferry's trust boundary, against the real ferry binary (the
// hostile workers are gRPC servers inside this test process; ferry, the mock
// cluster and the good worker are real processes):
//   * after Ready, a worker sends bytes that are not a ProcessResponse (a
//     few, or 10 MB) while it holds events: ferry resets the stream and
//     redelivers them; with on_failure skip nothing is committed that the
//     good worker did not process;
//   * a worker whose stream dies whenever it receives one particular event:
//     that event takes the failure policy after a bounded number of
//     redeliveries (core/engine/redelivery.h) and everything else is processed;
//   * a worker named with 10 MB and a forged log line: GetStatus still works
//     and shows a bounded name, and the log holds no forged line.
#include <grpcpp/grpcpp.h>

#include <atomic>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "ferry/v1/control.grpc.pb.h"
#include "ferry/v1/processor.grpc.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/e2e/e2e_support.h"

namespace ferry::testing {
namespace {

// How often the tests poll state other processes change.
constexpr absl::Duration kPoll = absl::Milliseconds(20);

using ::testing::HasSubstr;
using ::testing::Not;

grpc::ByteBuffer Bytes(const std::string& bytes) {
  grpc::Slice slice(bytes);
  return grpc::ByteBuffer(&slice, 1);
}

// Sends Ready, and once it holds events answers with bytes that do not parse
// as a ProcessResponse: a few bytes the first time, 10 MB the next, and so on.
// It never answers an event and never ends the call itself.
class GarbageService final
    : public v1::Processor::WithRawCallbackMethod_Process<v1::Processor::Service> {
 public:
  grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* Process(
      grpc::CallbackServerContext* /*context*/) override {
    ++streams_;
    return new Reactor(this);
  }
  int streams() const { return streams_; }
  int garbage_sent() const { return garbage_sent_; }
  int64_t events_received() const { return events_received_; }

 private:
  class Reactor final : public grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
   public:
    explicit Reactor(GarbageService* service) : service_(service) {
      v1::ProcessResponse ready;
      ready.mutable_ready()->set_max_in_flight(64);
      ready.mutable_ready()->set_worker_name("garbage");
      ready_ = Bytes(ready.SerializeAsString());
      absl::MutexLock lock(&mu_);
      writing_ = true;
      StartWrite(&ready_);
      StartRead(&request_);
    }
    void OnReadDone(bool ok) override {
      absl::MutexLock lock(&mu_);
      if (!ok) {
        reading_ = false;
        MaybeFinishLocked();
        return;
      }
      std::string bytes;
      std::vector<grpc::Slice> slices;
      if (request_.Dump(&slices).ok()) {
        for (const grpc::Slice& slice : slices) {
          bytes.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
        }
      }
      v1::ProcessRequest request;
      if (request.ParseFromString(bytes) && request.has_events()) {
        service_->events_received_ += request.events().events_size();
        garbage_due_ = true;
        MaybeWriteGarbageLocked();
      }
      StartRead(&request_);
    }
    void OnWriteDone(bool /*ok*/) override {
      absl::MutexLock lock(&mu_);
      writing_ = false;
      MaybeWriteGarbageLocked();
      MaybeFinishLocked();
    }
    void OnDone() override { delete this; }

   private:
    void MaybeWriteGarbageLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      if (!garbage_due_ || garbage_sent_ || writing_ || !reading_) return;
      garbage_sent_ = true;
      writing_ = true;
      garbage_ = Bytes(service_->garbage_sent_++ % 2 == 0 ? std::string("garbage!")
                                                          : std::string(10 << 20, '\xff'));
      StartWrite(&garbage_);
    }
    // Finishes once ferry has ended the call (reads fail) and no write is
    // outstanding.
    void MaybeFinishLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      if (reading_ || writing_ || finished_) return;
      finished_ = true;
      Finish(grpc::Status::OK);
    }

    GarbageService* const service_;
    grpc::ByteBuffer ready_;
    grpc::ByteBuffer garbage_;
    grpc::ByteBuffer request_;
    absl::Mutex mu_;
    bool writing_ ABSL_GUARDED_BY(mu_) = false;
    bool reading_ ABSL_GUARDED_BY(mu_) = true;
    bool garbage_due_ ABSL_GUARDED_BY(mu_) = false;
    bool garbage_sent_ ABSL_GUARDED_BY(mu_) = false;
    bool finished_ ABSL_GUARDED_BY(mu_) = false;
  };

  std::atomic<int> streams_{0};
  std::atomic<int> garbage_sent_{0};
  std::atomic<int64_t> events_received_{0};
};

// Acks every event, after a Ready naming itself `name`; when `poison_key` and
// `poison_payload` match an event, ends the stream with an error instead (as
// a worker's gRPC library does with a message it cannot parse). With
// `end_when_holding`, it ends each stream (status OK) as soon as it holds
// events, without answering them.
class SimpleProcessor final : public v1::Processor::Service {
 public:
  explicit SimpleProcessor(std::string name, std::string poison_key = "",
                           std::string poison_payload = "", bool end_when_holding = false)
      : name_(std::move(name)),
        poison_key_(std::move(poison_key)),
        poison_payload_(std::move(poison_payload)),
        end_when_holding_(end_when_holding) {}

  grpc::Status Process(grpc::ServerContext* /*context*/,
                       grpc::ServerReaderWriter<v1::ProcessResponse, v1::ProcessRequest>* stream)
      override {
    v1::ProcessResponse response;
    response.mutable_ready()->set_max_in_flight(16);
    response.mutable_ready()->set_worker_name(name_);
    if (!stream->Write(response)) return grpc::Status::OK;
    v1::ProcessRequest request;
    while (stream->Read(&request)) {
      if (!request.has_events()) continue;
      events_received_ += request.events().events_size();
      if (end_when_holding_) return grpc::Status::OK;
      response.Clear();
      for (const v1::Event& event : request.events().events()) {
        if (!poison_key_.empty() && event.key() == poison_key_ &&
            event.payload() == poison_payload_) {
          ++poison_received_;
          return grpc::Status(grpc::StatusCode::INTERNAL, "cannot parse the request");
        }
        {
          absl::MutexLock lock(&mu_);
          handled_.insert({event.partition(), event.offset()});
        }
        v1::Result* result = response.mutable_results()->add_results();
        result->set_id(event.id());
        result->set_status(v1::Result::OK);
      }
      response.mutable_results()->set_credit(request.events().events_size());
      if (!stream->Write(response)) break;
    }
    return grpc::Status::OK;
  }
  int poison_received() const { return poison_received_; }
  int64_t events_received() const { return events_received_; }
  size_t handled() const {
    absl::MutexLock lock(&mu_);
    return handled_.size();
  }

 private:
  const std::string name_;
  const std::string poison_key_;
  const std::string poison_payload_;
  const bool end_when_holding_;
  std::atomic<int> poison_received_{0};
  std::atomic<int64_t> events_received_{0};
  mutable absl::Mutex mu_;
  std::set<std::pair<int32_t, int64_t>> handled_ ABSL_GUARDED_BY(mu_);
};

// Stops ferry (expecting a clean exit), the in-process `server` and the good
// worker, then expects the good worker to have processed each of the
// `events` events (by partition and offset).
void StopAllAndExpectGoodWorkerProcessedAll(Subprocess& ferry, grpc::Server& server, Worker& good,
                                            int events) {
  EXPECT_EQ(Terminate(ferry, absl::Seconds(30)).value_or(-1), 0);
  server.Shutdown();
  ASSERT_EQ(Terminate(good.process, absl::Seconds(30)).value_or(-1), 0);
  absl::StatusOr<std::vector<HandledEvent>> handled = ReadHandledEvents(good.record_path);
  ASSERT_TRUE(handled.ok()) << handled.status();
  std::set<std::pair<int32_t, int64_t>> processed;
  for (const HandledEvent& event : *handled) processed.insert({event.partition, event.offset});
  EXPECT_EQ(processed.size(), static_cast<size_t>(events));
}

TEST(HostileWorkerTest, GarbageAfterReadyResetsTheStreamAndCommitsOnlyProcessedWork) {
  constexpr int kEvents = 2000;
  constexpr int kPartitions = 4;
  absl::StatusOr<MockCluster> cluster = StartMockCluster("garbage", kPartitions);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  ASSERT_TRUE(Produce(cluster->bootstrap, "garbage", kEvents, 100, kPartitions).ok());

  GarbageService garbage;
  int garbage_port = 0;
  std::unique_ptr<grpc::Server> server = Serve(&garbage, &garbage_port);
  ASSERT_NE(server, nullptr);
  // 2 ms per event keeps the run long enough for reset streams to reconnect
  // and take events again.
  absl::StatusOr<Worker> good = StartWorker("good-garbage", 16, 0, {"--work_us=2000"});
  ASSERT_TRUE(good.ok()) << good.status();

  // on_failure is skip (no dead-letter topic), and a short timeout: an event
  // stranded on a half-dead stream would be skipped and committed unprocessed.
  const std::string config = absl::StrReplaceAll(
      FerryConfig(cluster->bootstrap, "garbage-group", "garbage",
                  absl::StrCat("ipv4:127.0.0.1:", garbage_port, ",127.0.0.1:", good->port), 4),
      {{"timeout: 60s", "timeout: 3s"}});
  absl::StatusOr<Subprocess> ferry = StartFerry(config, "ferry-garbage");
  ASSERT_TRUE(ferry.ok()) << ferry.status();
  absl::StatusOr<test_tools::GroupProgress> progress = WaitAllCommitted(
      cluster->bootstrap, "garbage", "garbage-group", kEvents, *ferry, absl::Seconds(120));
  ASSERT_TRUE(progress.ok()) << progress.status() << "\n" << LogTail(*ferry);
  // Both kinds of garbage (a few bytes, 10 MB) were sent, each resetting a
  // stream that then reconnected.
  EXPECT_GE(garbage.garbage_sent(), 2);
  EXPECT_TRUE(PollUntil([&garbage] { return garbage.streams() >= 3; }, absl::Seconds(30), kPoll))
      << garbage.streams() << "\n" << LogTail(*ferry);
  // Everything committed was processed by the good worker.
  ASSERT_NO_FATAL_FAILURE(StopAllAndExpectGoodWorkerProcessedAll(*ferry, *server, *good, kEvents));
  EXPECT_TRUE(progress->AllCommitted());
  const std::string log = ferry->Log();
  EXPECT_GT(garbage.events_received(), 0);
  EXPECT_THAT(log, HasSubstr("bytes that is not a ProcessResponse"));
  EXPECT_THAT(log, HasSubstr(absl::StrCat("a message of ", 10 << 20, " bytes")));
  EXPECT_EQ(LastProgressValue(log, "failed"), 0) << LogTail(*ferry);
  EXPECT_GT(LastProgressValue(log, "redelivered"), 0);
}

// A worker that ends its side of the stream while ferry holds events for it:
// they are redelivered at once (not after the 60 s timeout) and processed by
// the good worker.
TEST(HostileWorkerTest, WorkerEndingItsStreamWhileHoldingEventsGetsThemRedelivered) {
  constexpr int kEvents = 1000;
  constexpr int kPartitions = 4;
  absl::StatusOr<MockCluster> cluster = StartMockCluster("ending", kPartitions);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  ASSERT_TRUE(Produce(cluster->bootstrap, "ending", kEvents, 100, kPartitions).ok());
  SimpleProcessor ending("ending", "", "", /*end_when_holding=*/true);
  int ending_port = 0;
  std::unique_ptr<grpc::Server> server = Serve(&ending, &ending_port);
  ASSERT_NE(server, nullptr);
  absl::StatusOr<Worker> good = StartWorker("good-ending", 16);
  ASSERT_TRUE(good.ok()) << good.status();
  absl::StatusOr<Subprocess> ferry = StartFerry(
      FerryConfig(cluster->bootstrap, "ending-group", "ending",
                  absl::StrCat("ipv4:127.0.0.1:", ending_port, ",127.0.0.1:", good->port), 4),
      "ferry-ending");
  ASSERT_TRUE(ferry.ok()) << ferry.status();
  absl::StatusOr<test_tools::GroupProgress> progress = WaitAllCommitted(
      cluster->bootstrap, "ending", "ending-group", kEvents, *ferry, absl::Seconds(40));
  ASSERT_TRUE(progress.ok()) << progress.status() << "\n" << LogTail(*ferry);
  ASSERT_NO_FATAL_FAILURE(StopAllAndExpectGoodWorkerProcessedAll(*ferry, *server, *good, kEvents));
  EXPECT_GT(ending.events_received(), 0);
  const std::string log = ferry->Log();
  EXPECT_EQ(LastProgressValue(log, "failed"), 0) << LogTail(*ferry);
  EXPECT_GT(LastProgressValue(log, "redelivered"), 0);
}

TEST(HostileWorkerTest, EventThatKillsEveryStreamTakesTheFailurePolicyAfterBoundedRedeliveries) {
  constexpr int kEvents = 300;
  constexpr int kPartitions = 3;
  absl::StatusOr<MockCluster> cluster = StartMockCluster("poison", kPartitions);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  ASSERT_TRUE(Produce(cluster->bootstrap, "poison", kEvents, 30, kPartitions).ok());

  // kafka_tool produce: key-i's records carry payloads 0, 1, 2, ...
  SimpleProcessor worker("rejecting", "key-7", "3");
  int port = 0;
  std::unique_ptr<grpc::Server> server = Serve(&worker, &port);
  ASSERT_NE(server, nullptr);
  absl::StatusOr<Subprocess> ferry =
      StartFerry(FerryConfig(cluster->bootstrap, "poison-group", "poison",
                             absl::StrCat("127.0.0.1:", port), 2),
                 "ferry-poison");
  ASSERT_TRUE(ferry.ok()) << ferry.status();
  absl::StatusOr<test_tools::GroupProgress> progress = WaitAllCommitted(
      cluster->bootstrap, "poison", "poison-group", kEvents, *ferry, absl::Seconds(120));
  ASSERT_TRUE(progress.ok()) << progress.status() << "\n" << LogTail(*ferry);
  EXPECT_EQ(Terminate(*ferry, absl::Seconds(30)).value_or(-1), 0);
  server->Shutdown();

  const std::string log = ferry->Log();
  // Redelivered up to the bound (10), then skipped with a clear error; every
  // other event was processed.
  EXPECT_EQ(worker.poison_received(), 11);
  EXPECT_EQ(worker.handled(), static_cast<size_t>(kEvents - 1));
  EXPECT_THAT(log, HasSubstr("redelivery limit: the worker stream was lost 11 times"));
  EXPECT_THAT(log, HasSubstr("cannot parse the request"));
  EXPECT_EQ(LastProgressValue(log, "failed"), 1) << LogTail(*ferry);
  EXPECT_EQ(LastProgressValue(log, "acked"), kEvents - 1);
}

TEST(HostileWorkerTest, HugeForgedWorkerNameIsBoundedInStatusAndLog) {
  constexpr int kEvents = 50;
  absl::StatusOr<MockCluster> cluster = StartMockCluster("named", 1);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  ASSERT_TRUE(Produce(cluster->bootstrap, "named", kEvents, 5, 1).ok());

  const std::string forged = "2026-01-01T00:00:00.000Z ERROR workers: forged by a worker";
  SimpleProcessor worker(std::string(10 << 20, 'n') + "\n" + forged);
  int port = 0;
  std::unique_ptr<grpc::Server> server = Serve(&worker, &port);
  ASSERT_NE(server, nullptr);
  absl::StatusOr<Subprocess> ferry = StartFerry(
      FerryConfig(cluster->bootstrap, "named-group", "named", absl::StrCat("127.0.0.1:", port), 1),
      "ferry-named");
  ASSERT_TRUE(ferry.ok()) << ferry.status();
  absl::StatusOr<test_tools::GroupProgress> progress = WaitAllCommitted(
      cluster->bootstrap, "named", "named-group", kEvents, *ferry, absl::Seconds(60));
  ASSERT_TRUE(progress.ok()) << progress.status() << "\n" << LogTail(*ferry);

  int control_port = -1;
  ASSERT_TRUE(PollUntil(
      [&] { return (control_port = FerryHealthPort(ferry->Log())) > 0; }, absl::Seconds(30),
      kPoll));
  auto stub = v1::Control::NewStub(grpc::CreateChannel(absl::StrCat("127.0.0.1:", control_port),
                                                       grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
  v1::GetStatusResponse status;
  const grpc::Status answered = stub->GetStatus(&context, v1::GetStatusRequest(), &status);
  ASSERT_TRUE(answered.ok()) << answered.error_code() << ": " << answered.error_message();
  ASSERT_GE(status.workers_size(), 1);
  const std::string& name = status.workers(0).worker_name();
  EXPECT_LE(name.size(), 256u + 32u);
  EXPECT_THAT(name, HasSubstr("bytes truncated"));
  EXPECT_THAT(name, Not(HasSubstr("\n")));

  EXPECT_EQ(Terminate(*ferry, absl::Seconds(30)).value_or(-1), 0);
  server->Shutdown();
  const std::string log = ferry->Log();
  EXPECT_LT(log.size(), 1u << 20) << "the name was logged unbounded";
  for (absl::string_view line : absl::StrSplit(log, '\n')) {
    EXPECT_FALSE(absl::StartsWith(line, forged)) << "a worker forged a log line";
  }
}

}  // namespace
}  // namespace ferry::testing
