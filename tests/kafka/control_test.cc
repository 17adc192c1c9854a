// The Control service on a real Kafka broker, with two ferry replicas in one
// consumer group sharing one worker (real processes, real gRPC):
//
//   PauseResumeResetAcrossReplicas
//     * a bearer token is required (missing or wrong: UNAUTHENTICATED);
//     * Pause of one partition (on replica A) stops exactly that partition:
//       the other partitions' new events are handled and committed, the
//       paused one's are not, whichever replica owns it (GetStatus shows it
//       paused); Resume (on replica B) lets it finish;
//     * ResetOffsets to a timestamp, dry run first (nothing changes), then
//       for real (on B): each partition restarts at the first offset at or
//       after the timestamp, the worker sees exactly those events again, and
//       the owners report it applied;
//     * invalid requests get INVALID_ARGUMENT / NOT_FOUND /
//       FAILED_PRECONDITION with a message that says what to change;
//     * server reflection lists ferry.v1.Control and grpc.health.v1.Health.
//   SkipUnblocksAPartitionHeldByASilentWorker
//     * a worker that never answers holds a one-key partition; SkipOffset of
//       the stuck offset dead-letters it (the dead-letter topic gets the
//       record) and the partition moves on, one offset per skip; an offset
//       that is queued but not in flight is refused.
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <signal.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "ferry/v1/control.grpc.pb.h"
#include "gtest/gtest.h"
#include "tests/e2e/e2e_support.h"
#include "tests/kafka/broker_environment.h"

namespace ferry::testing {
namespace {

const ::testing::Environment* const kBroker =
    ::testing::AddGlobalTestEnvironment(new BrokerEnvironment("control_test"));

constexpr char kToken[] = "s3cret-token";

using ControlTest = RealKafkaTest;

class ControlClient {
 public:
  ControlClient(int port, std::string token)
      : channel_(grpc::CreateChannel(absl::StrCat("127.0.0.1:", port),
                                     grpc::InsecureChannelCredentials())),
        stub_(v1::Control::NewStub(channel_)),
        token_(std::move(token)) {}

  template <typename Request, typename Response, typename Method>
  grpc::Status Call(Method method, const Request& request, Response* response,
                    const std::string& token) {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(60)));
    if (!token.empty()) context.AddMetadata("authorization", absl::StrCat("Bearer ", token));
    return (stub_.get()->*method)(&context, request, response);
  }
  template <typename Request, typename Response, typename Method>
  grpc::Status Call(Method method, const Request& request, Response* response) {
    return Call(method, request, response, token_);
  }

  grpc::Channel* channel() { return channel_.get(); }

 private:
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Control::Stub> stub_;
  std::string token_;
};

// Server reflection (grpc.reflection.v1alpha), list_services, as raw bytes:
// the request is field 7 (list_services) = "", and the answer carries the
// service names as strings.
std::string ReflectionListing(grpc::Channel* channel) {
  grpc::GenericStub stub(channel->shared_from_this());
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
  grpc::CompletionQueue queue;
  void* tag = nullptr;
  bool ok = false;
  std::unique_ptr<grpc::GenericClientAsyncReaderWriter> call = stub.PrepareCall(
      &context, "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo", &queue);
  call->StartCall(reinterpret_cast<void*>(1));
  if (!queue.Next(&tag, &ok) || !ok) return "<start failed>";
  const std::string request("\x3a\x00", 2);
  grpc::Slice slice(request);
  grpc::ByteBuffer buffer(&slice, 1);
  call->Write(buffer, reinterpret_cast<void*>(2));
  if (!queue.Next(&tag, &ok) || !ok) return "<write failed>";
  grpc::ByteBuffer answer;
  call->Read(&answer, reinterpret_cast<void*>(3));
  if (!queue.Next(&tag, &ok) || !ok) return "<read failed>";
  call->WritesDone(reinterpret_cast<void*>(4));
  queue.Next(&tag, &ok);
  grpc::Status status;
  call->Finish(&status, reinterpret_cast<void*>(5));
  queue.Next(&tag, &ok);
  queue.Shutdown();
  while (queue.Next(&tag, &ok)) {
  }
  std::vector<grpc::Slice> slices;
  if (!answer.Dump(&slices).ok()) return "<dump failed>";
  std::string bytes;
  for (const grpc::Slice& s : slices) {
    bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  }
  return bytes;
}

// Committed offsets per partition once `done(committed)` holds, or the last
// read after `timeout`.
test_tools::OffsetMap WaitCommitted(const std::string& topic, const std::string& group,
                                    const std::function<bool(const test_tools::OffsetMap&)>& done,
                                    absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  test_tools::OffsetMap committed;
  while (absl::Now() < deadline) {
    absl::StatusOr<test_tools::OffsetMap> read =
        test_tools::ReadCommittedOffsets(BrokerEnvironment::broker()->bootstrap(), topic, group);
    if (read.ok()) {
      committed = *read;
      if (done(committed)) return committed;
    }
    absl::SleepFor(absl::Milliseconds(200));  // polling the broker, not synchronising
  }
  return committed;
}

// Handled events per (partition, offset), read from a worker's flushed
// record file while it runs.
std::map<std::pair<int32_t, int64_t>, int> HandledCounts(const std::string& record_path) {
  std::map<std::pair<int32_t, int64_t>, int> counts;
  absl::StatusOr<std::vector<HandledEvent>> events = ReadHandledEvents(record_path);
  if (!events.ok()) return counts;
  for (const HandledEvent& event : *events) ++counts[{event.partition, event.offset}];
  return counts;
}

TEST_F(ControlTest, PauseResumeResetAcrossReplicas) {
  constexpr char kTopic[] = "control-events";
  constexpr char kGroup[] = "ferry-control";
  constexpr int kPartitions = 4;
  constexpr int kBatch = 400;  // 100 per partition (40 keys pinned round-robin)
  ASSERT_TRUE(broker().CreateTopic(kTopic, kPartitions).ok());
  const std::string token_file = TempPath("control-token");
  WriteFile(token_file, absl::StrCat(kToken, "\n"));

  absl::StatusOr<Worker> worker =
      StartWorker("control-worker", /*max_in_flight=*/64, 0, {"--record_flush"});
  ASSERT_TRUE(worker.ok()) << worker.status();
  const std::string target = absl::StrCat("ipv4:127.0.0.1:", worker->port);
  const std::string extra = absl::StrCat("control:\n  token_file: ", token_file, "\n");
  absl::StatusOr<Subprocess> ferry_a = StartFerry(
      FerryConfigWithKafka(bootstrap(), kGroup, kTopic, target, 2, {{"client.id", "replica-a"}},
                           extra),
      "control-a");
  ASSERT_TRUE(ferry_a.ok()) << ferry_a.status();
  absl::StatusOr<Subprocess> ferry_b = StartFerry(
      FerryConfigWithKafka(bootstrap(), kGroup, kTopic, target, 2, {{"client.id", "replica-b"}},
                           extra),
      "control-b");
  ASSERT_TRUE(ferry_b.ok()) << ferry_b.status();

  ASSERT_TRUE(Produce(bootstrap(), kTopic, kBatch, 40, kPartitions).ok());
  absl::StatusOr<test_tools::GroupProgress> first =
      WaitAllCommitted(bootstrap(), kTopic, kGroup, kBatch, *ferry_a, absl::Seconds(90));
  ASSERT_TRUE(first.ok()) << first.status() << LogTail(*ferry_a) << LogTail(*ferry_b);

  int port_a = -1;
  int port_b = -1;
  for (int i = 0; i < 100 && (port_a < 0 || port_b < 0); ++i) {
    port_a = FerryHealthPort(ferry_a->Log());
    port_b = FerryHealthPort(ferry_b->Log());
    if (port_a < 0 || port_b < 0) absl::SleepFor(absl::Milliseconds(50));
  }
  ASSERT_GT(port_a, 0) << LogTail(*ferry_a);
  ASSERT_GT(port_b, 0) << LogTail(*ferry_b);
  ControlClient a(port_a, kToken);
  ControlClient b(port_b, kToken);
  // Both replicas own two partitions each (the range assignor) once the
  // group is stable; B may have joined after A consumed the first batch.
  {
    const absl::Time deadline = absl::Now() + absl::Seconds(60);
    bool stable = false;
    while (!stable && absl::Now() < deadline) {
      v1::GetStatusResponse status_a;
      v1::GetStatusResponse status_b;
      stable = a.Call(&v1::Control::Stub::GetStatus, v1::GetStatusRequest(), &status_a).ok() &&
               b.Call(&v1::Control::Stub::GetStatus, v1::GetStatusRequest(), &status_b).ok() &&
               status_a.partitions_size() == 2 && status_b.partitions_size() == 2;
      // A new owner learns a partition's end offset from its first fetch
      // answer: until then GetStatus says -1 (never librdkafka's -1001).
      for (const v1::GetStatusResponse* status : {&status_a, &status_b}) {
        for (const v1::PartitionStatus& partition : status->partitions()) {
          EXPECT_GE(partition.end_offset(), -1);
          EXPECT_GE(partition.lag(), -1);
          stable = stable && partition.end_offset() == kBatch / kPartitions &&
                   partition.committed_offset() == kBatch / kPartitions;
        }
      }
      if (!stable) absl::SleepFor(absl::Milliseconds(100));  // polling status
    }
    ASSERT_TRUE(stable) << LogTail(*ferry_a) << LogTail(*ferry_b);
  }

  // Authentication.
  {
    v1::GetStatusResponse status;
    EXPECT_EQ(a.Call(&v1::Control::Stub::GetStatus, v1::GetStatusRequest(), &status, "")
                  .error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
    EXPECT_EQ(a.Call(&v1::Control::Stub::GetStatus, v1::GetStatusRequest(), &status, "wrong")
                  .error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
    grpc::Status ok = a.Call(&v1::Control::Stub::GetStatus, v1::GetStatusRequest(), &status);
    ASSERT_TRUE(ok.ok()) << ok.error_message();
    EXPECT_EQ(status.replica(), "replica-a");
    EXPECT_EQ(status.group_id(), kGroup);
    ASSERT_EQ(status.workers_size(), 2);  // streams: 2
    EXPECT_EQ(status.workers(0).worker_name(), "control-worker");
    EXPECT_TRUE(status.workers(0).ready());
    EXPECT_EQ(status.lane_count(), 2048);  // auto: 4 x 2 streams x 256 in flight
    EXPECT_EQ(status.partitions_size(), 2);  // half of the 4 partitions each
    for (const v1::PartitionStatus& partition : status.partitions()) {
      EXPECT_EQ(partition.committed_offset(), kBatch / kPartitions);
      EXPECT_EQ(partition.end_offset(), kBatch / kPartitions);
      EXPECT_EQ(partition.lag(), 0);
      EXPECT_EQ(partition.lowest_unfinished_offset(), -1);
    }
  }

  // The operator's CLI against the real server: JSON status, and a usage
  // error without a token file gets UNAUTHENTICATED (exit 1).
  {
    absl::StatusOr<Subprocess> ctl = Subprocess::Start(
        {"clients/ferryctl/ferryctl", "status", absl::StrCat("--server=127.0.0.1:", port_a),
         absl::StrCat("--token_file=", token_file), "--output=json"},
        TempPath("ferryctl-status.log"));
    ASSERT_TRUE(ctl.ok()) << ctl.status();
    EXPECT_EQ(ctl->Wait(absl::Seconds(60)).value_or(-1), 0) << ctl->Log();
    EXPECT_TRUE(absl::StrContains(ctl->Log(), "\"replica\":\"replica-a\"")) << ctl->Log();
    absl::StatusOr<Subprocess> refused = Subprocess::Start(
        {"clients/ferryctl/ferryctl", "status", absl::StrCat("--server=127.0.0.1:", port_a)},
        TempPath("ferryctl-refused.log"));
    ASSERT_TRUE(refused.ok()) << refused.status();
    EXPECT_EQ(refused->Wait(absl::Seconds(60)).value_or(-1), 1) << refused->Log();
    EXPECT_TRUE(absl::StrContains(refused->Log(), "UNAUTHENTICATED")) << refused->Log();
  }

  // Reflection lists the services.
  const std::string listing = ReflectionListing(a.channel());
  EXPECT_TRUE(absl::StrContains(listing, "ferry.v1.Control")) << listing;
  EXPECT_TRUE(absl::StrContains(listing, "grpc.health.v1.Health")) << listing;

  // Pause partition 0 on A.
  {
    v1::PauseRequest pause;
    pause.set_topic(kTopic);
    pause.add_partitions(0);
    v1::PauseResponse paused;
    grpc::Status status = a.Call(&v1::Control::Stub::Pause, pause, &paused);
    ASSERT_TRUE(status.ok()) << status.error_message();
    ASSERT_EQ(paused.partitions_size(), 1);
    EXPECT_EQ(paused.partitions(0).partition(), 0);
  }
  const absl::Time before_second_batch = absl::Now();
  absl::SleepFor(absl::Milliseconds(20));  // record timestamps strictly after it
  ASSERT_TRUE(Produce(bootstrap(), kTopic, kBatch, 40, kPartitions).ok());
  const test_tools::OffsetMap while_paused = WaitCommitted(
      kTopic, kGroup,
      [](const test_tools::OffsetMap& c) {
        for (int p = 1; p < kPartitions; ++p) {
          if (c.count(p) == 0 || c.at(p) != 2 * kBatch / kPartitions) return false;
        }
        return true;
      },
      absl::Seconds(60));
  for (int p = 1; p < kPartitions; ++p) {
    EXPECT_EQ(while_paused.at(p), 2 * kBatch / kPartitions) << "partition " << p;
  }
  // The paused partition stays where it was while the others finished (and
  // three more commit intervals).
  absl::SleepFor(absl::Seconds(1));  // a bounded "nothing happens" window
  {
    absl::StatusOr<test_tools::OffsetMap> now =
        test_tools::ReadCommittedOffsets(bootstrap(), kTopic, kGroup);
    ASSERT_TRUE(now.ok());
    EXPECT_EQ(now->at(0), kBatch / kPartitions);
    const auto handled = HandledCounts(worker->record_path);
    for (int64_t offset = kBatch / kPartitions; offset < 2 * kBatch / kPartitions; ++offset) {
      EXPECT_EQ(handled.count({0, offset}), 0u) << "paused partition 0 dispatched " << offset;
    }
  }
  // Whichever replica owns partition 0 reports it paused.
  {
    int reported = 0;
    for (ControlClient* client : {&a, &b}) {
      v1::GetStatusResponse status;
      ASSERT_TRUE(client->Call(&v1::Control::Stub::GetStatus, v1::GetStatusRequest(), &status)
                      .ok());
      for (const v1::PartitionStatus& partition : status.partitions()) {
        if (partition.partition() != 0) {
          EXPECT_FALSE(partition.paused()) << partition.partition();
          continue;
        }
        ++reported;
        EXPECT_TRUE(partition.paused());
        EXPECT_TRUE(partition.fetch_paused());
      }
      ASSERT_EQ(status.pause_commands_size(), 1);
      EXPECT_EQ(status.pause_commands(0), absl::StrCat("pause ", kTopic, "/0"));
    }
    EXPECT_EQ(reported, 1);
  }

  // Resume on the other replica.
  {
    v1::ResumeRequest resume;
    resume.set_topic(kTopic);
    v1::ResumeResponse resumed;
    grpc::Status status = b.Call(&v1::Control::Stub::Resume, resume, &resumed);
    ASSERT_TRUE(status.ok()) << status.error_message();
    EXPECT_EQ(resumed.partitions_size(), kPartitions);
  }
  absl::StatusOr<test_tools::GroupProgress> second =
      WaitAllCommitted(bootstrap(), kTopic, kGroup, 2 * kBatch, *ferry_a, absl::Seconds(60));
  ASSERT_TRUE(second.ok()) << second.status() << LogTail(*ferry_a) << LogTail(*ferry_b);

  // Invalid requests.
  {
    v1::PauseResponse paused;
    grpc::Status empty = a.Call(&v1::Control::Stub::Pause, v1::PauseRequest(), &paused);
    EXPECT_EQ(empty.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << empty.error_message();
    v1::PauseRequest unknown;
    unknown.set_topic("no-such-topic");
    grpc::Status not_found = a.Call(&v1::Control::Stub::Pause, unknown, &paused);
    EXPECT_EQ(not_found.error_code(), grpc::StatusCode::NOT_FOUND);
    EXPECT_TRUE(absl::StrContains(not_found.error_message(), kTopic)) << not_found.error_message();
    v1::PauseRequest out_of_range;
    out_of_range.set_topic(kTopic);
    out_of_range.add_partitions(99);
    grpc::Status range = a.Call(&v1::Control::Stub::Pause, out_of_range, &paused);
    EXPECT_EQ(range.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_TRUE(absl::StrContains(range.error_message(), "0..3")) << range.error_message();

    v1::ResetOffsetsResponse reset;
    v1::ResetOffsetsRequest no_target;
    no_target.set_topic(kTopic);
    EXPECT_EQ(a.Call(&v1::Control::Stub::ResetOffsets, no_target, &reset).error_code(),
              grpc::StatusCode::INVALID_ARGUMENT);
    v1::ResetOffsetsRequest beyond = no_target;
    beyond.set_to_offset(1000000);
    grpc::Status beyond_status = a.Call(&v1::Control::Stub::ResetOffsets, beyond, &reset);
    EXPECT_EQ(beyond_status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_TRUE(absl::StrContains(beyond_status.error_message(), "beyond the end"))
        << beyond_status.error_message();
    v1::ResetOffsetsRequest future = no_target;
    future.set_to_timestamp_ms(absl::ToUnixMillis(absl::Now() + absl::Hours(1)));
    grpc::Status future_status = a.Call(&v1::Control::Stub::ResetOffsets, future, &reset);
    EXPECT_EQ(future_status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_TRUE(absl::StrContains(future_status.error_message(), "future"));

    v1::SkipOffsetRequest skip;
    skip.set_topic(kTopic);
    skip.set_partition(1);
    skip.set_offset(5);  // long finished
    v1::SkipOffsetResponse skipped;
    grpc::Status not_in_flight = a.Call(&v1::Control::Stub::SkipOffset, skip, &skipped);
    EXPECT_EQ(not_in_flight.error_code(), grpc::StatusCode::FAILED_PRECONDITION)
        << not_in_flight.error_message();
    EXPECT_TRUE(absl::StrContains(not_in_flight.error_message(), "cannot skip"))
        << not_in_flight.error_message();
  }

  // Reset to the time just before the second batch: dry run, then for real.
  v1::ResetOffsetsRequest reset;
  reset.set_topic(kTopic);
  reset.set_to_timestamp_ms(absl::ToUnixMillis(before_second_batch));
  reset.set_dry_run(true);
  {
    v1::ResetOffsetsResponse planned;
    grpc::Status status = a.Call(&v1::Control::Stub::ResetOffsets, reset, &planned);
    ASSERT_TRUE(status.ok()) << status.error_message();
    EXPECT_TRUE(planned.dry_run());
    ASSERT_EQ(planned.partitions_size(), kPartitions);
    for (const v1::PartitionReset& partition : planned.partitions()) {
      EXPECT_EQ(partition.new_offset(), kBatch / kPartitions) << partition.partition();
      EXPECT_EQ(partition.current_offset(), 2 * kBatch / kPartitions);
      EXPECT_EQ(partition.end_offset(), 2 * kBatch / kPartitions);
      EXPECT_FALSE(partition.applied());
    }
    absl::SleepFor(absl::Seconds(1));  // a bounded "nothing happens" window
    absl::StatusOr<test_tools::GroupProgress> unchanged =
        test_tools::ReadGroupProgress(bootstrap(), kTopic, kGroup);
    ASSERT_TRUE(unchanged.ok());
    EXPECT_TRUE(unchanged->AllCommitted()) << test_tools::FormatGroupProgress(*unchanged);
    EXPECT_EQ(unchanged->TotalCommitted(), 2 * kBatch);
  }
  const auto handled_before_reset = HandledCounts(worker->record_path);
  reset.set_dry_run(false);
  {
    v1::ResetOffsetsResponse applied;
    grpc::Status status = b.Call(&v1::Control::Stub::ResetOffsets, reset, &applied);
    ASSERT_TRUE(status.ok()) << status.error_message();
    ASSERT_EQ(applied.partitions_size(), kPartitions);
    std::set<std::string> appliers;
    for (const v1::PartitionReset& partition : applied.partitions()) {
      EXPECT_TRUE(partition.applied()) << partition.partition() << " " << partition.error();
      appliers.insert(partition.applied_by());
    }
    for (const std::string& applier : appliers) {
      EXPECT_TRUE(applier == "replica-a" || applier == "replica-b") << applier;
    }
  }
  // The second batch is handled again, the first is not.
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  std::map<std::pair<int32_t, int64_t>, int> handled;
  auto replayed_all = [&] {
    for (int p = 0; p < kPartitions; ++p) {
      for (int64_t o = kBatch / kPartitions; o < 2 * kBatch / kPartitions; ++o) {
        const std::pair<int32_t, int64_t> at(p, o);
        if (handled[at] < handled_before_reset.at(at) + 1) return false;
      }
    }
    return true;
  };
  do {
    handled = HandledCounts(worker->record_path);
    if (replayed_all()) break;
    absl::SleepFor(absl::Milliseconds(200));  // polling a file, not synchronising
  } while (absl::Now() < deadline);
  EXPECT_TRUE(replayed_all());
  absl::StatusOr<test_tools::GroupProgress> third =
      WaitAllCommitted(bootstrap(), kTopic, kGroup, 2 * kBatch, *ferry_a, absl::Seconds(60));
  ASSERT_TRUE(third.ok()) << third.status();
  handled = HandledCounts(worker->record_path);
  for (int p = 0; p < kPartitions; ++p) {
    for (int64_t o = 0; o < kBatch / kPartitions; ++o) {
      const std::pair<int32_t, int64_t> at(p, o);
      EXPECT_EQ(handled[at], handled_before_reset.at(at))
          << "offset before the reset point replayed: " << p << "@" << o;
    }
  }

  for (Subprocess* ferry : {&*ferry_a, &*ferry_b}) {
    absl::StatusOr<int> exit = Terminate(*ferry, absl::Seconds(60));
    ASSERT_TRUE(exit.ok()) << exit.status();
    EXPECT_EQ(*exit, 0) << LogTail(*ferry);
  }
  absl::StatusOr<int> worker_exit = Terminate(worker->process, absl::Seconds(30));
  ASSERT_TRUE(worker_exit.ok());
}

TEST_F(ControlTest, SkipUnblocksAPartitionHeldByASilentWorker) {
  constexpr char kTopic[] = "control-stuck";
  constexpr char kDeadLetters[] = "control-stuck-dlq";
  constexpr char kGroup[] = "ferry-control-skip";
  ASSERT_TRUE(broker().CreateTopic(kTopic, 1).ok());
  ASSERT_TRUE(broker().CreateTopic(kDeadLetters, 1).ok());
  // One key: one lane, one event in flight at a time (the worker takes no
  // runs, so offset+3 stays queued behind the stuck one). The worker holds
  // every event for ten minutes: it never answers within the test.
  ASSERT_TRUE(Produce(bootstrap(), kTopic, 10, 1, 1).ok());
  absl::StatusOr<Worker> worker =
      StartWorker("silent", /*max_in_flight=*/8, 0,
                  {"--stall_rate=1", "--stall_ms=600000", "--max_run=1"});
  ASSERT_TRUE(worker.ok()) << worker.status();
  absl::StatusOr<Subprocess> ferry = StartFerry(
      FerryConfig(bootstrap(), kGroup, kTopic, absl::StrCat("ipv4:127.0.0.1:", worker->port), 1,
                  absl::StrCat("failures:\n  dead_letter_topic: ", kDeadLetters,
                               "\nshutdown:\n  grace: 1s\n")),
      "control-skip");
  ASSERT_TRUE(ferry.ok()) << ferry.status();
  int port = -1;
  for (int i = 0; i < 200 && port < 0; ++i) {
    port = FerryHealthPort(ferry->Log());
    if (port < 0) absl::SleepFor(absl::Milliseconds(50));
  }
  ASSERT_GT(port, 0) << LogTail(*ferry);
  ControlClient control(port, "");

  for (int64_t stuck = 0; stuck < 2; ++stuck) {
    // Wait until the stuck offset is in flight (GetStatus), then skip it.
    const absl::Time deadline = absl::Now() + absl::Seconds(60);
    bool in_flight = false;
    while (!in_flight && absl::Now() < deadline) {
      v1::GetStatusResponse status;
      ASSERT_TRUE(control.Call(&v1::Control::Stub::GetStatus, v1::GetStatusRequest(), &status)
                      .ok());
      for (const v1::PartitionStatus& partition : status.partitions()) {
        in_flight = in_flight || (partition.lowest_unfinished_offset() == stuck &&
                                  partition.in_flight() == 1);
      }
      if (!in_flight) absl::SleepFor(absl::Milliseconds(100));  // polling status
    }
    ASSERT_TRUE(in_flight) << "offset " << stuck << " never in flight\n" << LogTail(*ferry);

    v1::SkipOffsetRequest queued;  // queued behind it, not in flight
    queued.set_topic(kTopic);
    queued.set_offset(stuck + 3);
    v1::SkipOffsetResponse refused;
    grpc::Status refusal = control.Call(&v1::Control::Stub::SkipOffset, queued, &refused);
    EXPECT_EQ(refusal.error_code(), grpc::StatusCode::FAILED_PRECONDITION)
        << refusal.error_message();

    v1::SkipOffsetRequest skip;
    skip.set_topic(kTopic);
    skip.set_offset(stuck);
    v1::SkipOffsetResponse skipped;
    grpc::Status status = control.Call(&v1::Control::Stub::SkipOffset, skip, &skipped);
    ASSERT_TRUE(status.ok()) << status.error_message() << LogTail(*ferry);
    EXPECT_EQ(skipped.outcome(), "dead_lettered");
    // The partition moves on past it.
    const test_tools::OffsetMap committed = WaitCommitted(
        kTopic, kGroup, [stuck](const test_tools::OffsetMap& c) { return c.at(0) == stuck + 1; },
        absl::Seconds(30));
    EXPECT_EQ(committed.at(0), stuck + 1) << LogTail(*ferry);
  }
  absl::StatusOr<std::vector<test_tools::ConsumedRecord>> dead =
      test_tools::ReadTopic(bootstrap(), kDeadLetters);
  ASSERT_TRUE(dead.ok()) << dead.status();
  ASSERT_EQ(dead->size(), 2u);
  EXPECT_EQ((*dead)[0].Header("ferry.source.offset"), "0");

  ferry->Signal(SIGTERM);  // the silent worker holds events: a 1s grace
  absl::StatusOr<int> exit = ferry->Wait(absl::Seconds(60));
  ASSERT_TRUE(exit.ok()) << exit.status();
  worker->process.Signal(SIGKILL);
}

}  // namespace
}  // namespace ferry::testing
