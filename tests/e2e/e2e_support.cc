#include "tests/e2e/e2e_support.h"

#include <signal.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"

namespace ferry::testing {

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return absl::StrCat(dir != nullptr ? dir : "/tmp", "/", name);
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream contents;
  contents << in.rdbuf();
  return contents.str();
}

void WriteFile(const std::string& path, const std::string& contents) {
  std::ofstream out(path, std::ios::trunc);
  out << contents;
}

absl::StatusOr<MockCluster> StartMockCluster(const std::string& topic, int partitions) {
  return StartMockClusterWithTopics({topic}, partitions);
}

absl::StatusOr<MockCluster> StartMockClusterWithTopics(const std::vector<std::string>& topics,
                                                       int partitions) {
  if (topics.empty()) return absl::InvalidArgumentError("a mock cluster needs a topic");
  const std::string& topic = topics.front();  // names the cluster's files
  const std::string bootstrap_file = TempPath(absl::StrCat("bootstrap-", topic));
  absl::StatusOr<Subprocess> process = Subprocess::Start(
      {"tests/tools/kafka_tool", "mock", absl::StrCat("--partitions=", partitions),
       absl::StrCat("--topics=", absl::StrJoin(topics, ",")),
       absl::StrCat("--bootstrap_file=", bootstrap_file)},
      TempPath(absl::StrCat("mock-", topic, ".log")));
  if (!process.ok()) return process.status();
  absl::StatusOr<std::string> bootstrap = WaitForFile(bootstrap_file, absl::Seconds(30));
  if (!bootstrap.ok()) return bootstrap.status();
  return MockCluster{*std::move(process), std::string(absl::StripAsciiWhitespace(*bootstrap))};
}

absl::Status Produce(const std::string& bootstrap, const std::string& topic, int count, int keys,
                     int partitions) {
  absl::StatusOr<Subprocess> producer = Subprocess::Start(
      {"tests/tools/kafka_tool", "produce", absl::StrCat("--bootstrap=", bootstrap),
       absl::StrCat("--topic=", topic), absl::StrCat("--count=", count),
       absl::StrCat("--keys=", keys), absl::StrCat("--partitions=", partitions)},
      TempPath(absl::StrCat("produce-", topic, ".log")));
  if (!producer.ok()) return producer.status();
  absl::StatusOr<int> exit = producer->Wait(absl::Seconds(120));
  if (!exit.ok()) return exit.status();
  if (*exit != 0) return absl::InternalError(absl::StrCat("produce failed:\n", producer->Log()));
  return absl::OkStatus();
}

absl::StatusOr<Worker> StartWorker(const std::string& name, int max_in_flight, int port,
                                   const std::vector<std::string>& extra_flags) {
  Worker worker;
  const std::string port_file = TempPath(absl::StrCat("port-", name));
  std::remove(port_file.c_str());
  worker.record_path = TempPath(absl::StrCat("record-", name));
  worker.stats_path = TempPath(absl::StrCat("stats-", name));
  std::vector<std::string> argv = {"clients/cpp/examples/example_worker",
                                   absl::StrCat("--listen=127.0.0.1:", port),
                                   absl::StrCat("--max_in_flight=", max_in_flight),
                                   absl::StrCat("--name=", name),
                                   absl::StrCat("--port_file=", port_file),
                                   absl::StrCat("--record=", worker.record_path),
                                   absl::StrCat("--stats=", worker.stats_path)};
  argv.insert(argv.end(), extra_flags.begin(), extra_flags.end());
  absl::StatusOr<Subprocess> process =
      Subprocess::Start(argv, TempPath(absl::StrCat("worker-", name, ".log")));
  if (!process.ok()) return process.status();
  worker.process = *std::move(process);
  absl::StatusOr<std::string> bound = WaitForFile(port_file, absl::Seconds(30));
  if (!bound.ok()) return bound.status();
  if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(*bound), &worker.port)) {
    return absl::InternalError(absl::StrCat("bad port file: ", *bound));
  }
  return worker;
}

std::string FerryConfig(const std::string& bootstrap, const std::string& group,
                        const std::string& topic, const std::string& target, int streams,
                        const std::string& extra, const std::string& progress_interval) {
  return absl::StrCat("kafka:\n"
                      "  bootstrap.servers: ", bootstrap, "\n",
                      "  group.id: ", group, "\n",
                      "  session.timeout.ms: 6000\n"
                      "  heartbeat.interval.ms: 500\n"
                      "topics:\n"
                      "  - name: ", topic, "\n",
                      "    ordering: key\n"
                      "processors:\n"
                      "  - name: default\n"
                      "    target: ", target, "\n",
                      "    streams: ", streams, "\n",
                      "    timeout: 60s\n"
                      "server:\n"
                      "  listen: 127.0.0.1:0\n"
                      "commit:\n"
                      "  interval: 200ms\n"
                      "log:\n"
                      "  progress_interval: ", progress_interval, "\n",
                      extra);
}

absl::StatusOr<Subprocess> StartFerry(const std::string& config_yaml, const std::string& name) {
  const std::string config = TempPath(absl::StrCat(name, ".yaml"));
  WriteFile(config, config_yaml);
  return Subprocess::Start({"server/ferry", absl::StrCat("--config=", config)},
                           TempPath(absl::StrCat(name, ".log")));
}

absl::StatusOr<test_tools::GroupProgress> WaitAllCommitted(const std::string& bootstrap,
                                                           const std::string& topic,
                                                           const std::string& group,
                                                           int64_t expected_total,
                                                           Subprocess& ferry,
                                                           absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  test_tools::GroupProgress progress;
  while (absl::Now() < deadline) {
    if (ferry.TryWait().has_value()) {
      return absl::InternalError(absl::StrCat("ferry exited early with ", *ferry.TryWait()));
    }
    absl::StatusOr<test_tools::GroupProgress> read =
        test_tools::ReadGroupProgress(bootstrap, topic, group);
    if (read.ok()) {
      progress = *read;
      if (progress.AllCommitted() && progress.TotalEnd() == expected_total) return progress;
    }
    absl::SleepFor(absl::Milliseconds(250));  // polling the broker
  }
  return absl::DeadlineExceededError(absl::StrCat("not all committed:\n",
                                                  test_tools::FormatGroupProgress(progress)));
}

absl::StatusOr<bool> IsServing(int port) {
  auto channel = grpc::CreateChannel(absl::StrCat("127.0.0.1:", port),
                                     grpc::InsecureChannelCredentials());
  grpc::GenericStub stub(channel);
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(5)));
  // HealthCheckRequest{service: ""} encodes to no bytes; the response's only
  // field is `status` (field 1, varint): SERVING = 1.
  grpc::Slice no_bytes(std::string{});
  grpc::ByteBuffer request(&no_bytes, 1);
  grpc::ByteBuffer response;
  absl::Notification done;
  grpc::Status status;
  stub.UnaryCall(&context, "/grpc.health.v1.Health/Check", grpc::StubOptions(), &request,
                 &response, [&](grpc::Status result) {
                   status = std::move(result);
                   done.Notify();
                 });
  done.WaitForNotification();
  if (!status.ok()) return absl::UnavailableError(status.error_message());
  std::vector<grpc::Slice> slices;
  if (!response.Dump(&slices).ok()) return absl::InternalError("unreadable health response");
  std::string bytes;
  for (const grpc::Slice& slice : slices) {
    bytes.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
  }
  return bytes == std::string("\x08\x01", 2);
}

int FerryHealthPort(const std::string& log) {
  // "serving Control, health and reflection on port N (...)"
  const std::string marker = "health and reflection on port ";
  const size_t at = log.find(marker);
  if (at == std::string::npos) return -1;
  const size_t start = at + marker.size();
  size_t end = start;
  while (end < log.size() && absl::ascii_isdigit(static_cast<unsigned char>(log[end]))) ++end;
  int port = -1;
  if (!absl::SimpleAtoi(log.substr(start, end - start), &port)) return -1;
  return port;
}

int WaitForControlPort(Subprocess& ferry) {
  int port = -1;
  PollUntil([&] { return (port = FerryHealthPort(ferry.Log())) > 0 || ferry.TryWait(); },
            absl::Seconds(30));
  return port;
}

absl::StatusOr<v1::GetStatusResponse> GetFerryStatus(int port, const std::string& token) {
  auto stub = v1::Control::NewStub(grpc::CreateChannel(absl::StrCat("127.0.0.1:", port),
                                                       grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
  if (!token.empty()) context.AddMetadata("authorization", absl::StrCat("Bearer ", token));
  v1::GetStatusResponse status;
  const grpc::Status answered = stub->GetStatus(&context, v1::GetStatusRequest(), &status);
  if (!answered.ok()) return absl::UnavailableError(answered.error_message());
  return status;
}

std::string WorkerTarget(const Worker& worker) {
  return absl::StrCat("ipv4:127.0.0.1:", worker.port);
}

int64_t LastProgressValue(const std::string& log, const std::string& name) {
  const size_t line_start = log.rfind("progress:");
  if (line_start == std::string::npos) return -1;
  const std::string key = absl::StrCat(" ", name, "=");
  const size_t at = log.find(key, line_start);
  const size_t line_end = log.find('\n', line_start);
  if (at == std::string::npos || at > line_end) return -1;
  const size_t value_start = at + key.size();
  const size_t value_end = log.find_first_not_of("0123456789", value_start);
  int64_t value = -1;
  if (!absl::SimpleAtoi(log.substr(value_start, value_end - value_start), &value)) return -1;
  return value;
}

std::map<std::string, int64_t> ReadStats(const std::string& path) {
  std::map<std::string, int64_t> stats;
  for (absl::string_view line : absl::StrSplit(ReadFile(path), '\n', absl::SkipEmpty())) {
    std::pair<std::string, std::string> kv = absl::StrSplit(line, absl::MaxSplits('=', 1));
    int64_t value = 0;
    if (absl::SimpleAtoi(kv.second, &value)) stats[kv.first] = value;
  }
  return stats;
}

std::string FerryConfigWithKafka(
    const std::string& bootstrap, const std::string& group, const std::string& topic,
    const std::string& target, int streams,
    const std::vector<std::pair<std::string, std::string>>& kafka_properties,
    const std::string& extra, const std::string& progress_interval) {
  std::string config =
      FerryConfig(bootstrap, group, topic, target, streams, extra, progress_interval);
  std::string more;
  for (const auto& [name, value] : kafka_properties) {
    absl::StrAppend(&more, "  ", name, ": ", value, "\n");
    // KIP-848's consumer protocol: the broker owns these two (librdkafka
    // refuses them); tests/kafka/kafka_broker sets the same values there.
    if (name == "group.protocol" && value == "consumer") {
      for (const std::string line :
           {"  session.timeout.ms: 6000\n", "  heartbeat.interval.ms: 500\n"}) {
        const size_t at = config.find(line);
        if (at != std::string::npos) config.erase(at, line.size());
      }
    }
  }
  // The kafka: map is the first section; its entries end where topics: starts.
  const size_t topics = config.find("\ntopics:\n");
  config.insert(topics + 1, more);
  return config;
}

absl::StatusOr<std::vector<HandledEvent>> ReadHandledEvents(const std::string& record_path) {
  std::vector<HandledEvent> handled;
  std::ifstream in(record_path);
  if (!in) return handled;  // the worker never opened it: nothing handled
  std::string line;
  int64_t number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (line.empty()) continue;
    std::vector<absl::string_view> fields = absl::StrSplit(line, '\t');
    HandledEvent event;
    if (fields.size() < 5 || !absl::SimpleAtoi(fields[1], &event.sequence) ||
        !absl::SimpleAtoi(fields[2], &event.monotonic_ns) ||
        !absl::SimpleAtoi(fields[3], &event.partition) ||
        !absl::SimpleAtoi(fields[4], &event.offset)) {
      return absl::DataLossError(
          absl::StrCat(record_path, ":", number, ": not a record line: ", line));
    }
    event.key = std::string(fields[0]);
    if (fields.size() >= 6) event.answer = std::string(fields[5]);
    handled.push_back(std::move(event));
  }
  return handled;
}

absl::StatusOr<int> Terminate(Subprocess& process, absl::Duration timeout) {
  if (!process.TryWait().has_value()) process.Signal(SIGTERM);
  return process.Wait(timeout);
}

std::string LogTail(const Subprocess& process, size_t max_chars) {
  const std::string log = process.Log();
  return absl::StrCat("---- ", process.log_path(), " (tail) ----\n",
                      log.substr(log.size() > max_chars ? log.size() - max_chars : 0), "\n");
}

int StopWorker(Worker& worker) {
  worker.process.Signal(SIGTERM);
  return worker.process.Wait(absl::Seconds(30)).value_or(-1);
}

std::unique_ptr<grpc::Server> Serve(grpc::Service* service, int* port) {
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), port);
  builder.RegisterService(service);
  // What README asks of plain-gRPC workers: permit ferry's keepalive pings on
  // idle streams (gRPC's default answers them with GOAWAY too_many_pings).
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 500);
  return builder.BuildAndStart();
}

}  // namespace ferry::testing
