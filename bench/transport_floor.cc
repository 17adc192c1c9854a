// transport_floor: the floor of ferry's architecture (issue 17 §1,
// bench/README.md) — what "consume from Kafka + ship each record to another
// process + get its answer back" costs on this machine, with no engine in
// between. Two modes of one binary:
//
//   transport_floor --mode=sink --listen 127.0.0.1:0 --port_file F [--credit 256]
//     A no-op Processor server: Ready{max_in_flight = --credit}, then every
//     Events message is answered at once by one Results message (all OK) that
//     carries the credit back (Results.credit when the client sends
//     `ferry-results-credit: 1`, as ferry does; else a Credit message).
//     Runs until SIGTERM / SIGINT.
//
//   transport_floor --mode=forward --target ipv4:127.0.0.1:P --bootstrap B
//                   --topic T --count N [--batch 64] [--kafka name=value,...]
//                   [--ready_file F] [--timeout_s 600]
//     Reads the topic with baseline A's consumer (bench/bench_kafka.h) and
//     forwards the records as ferry.v1.Events (up to --batch per message)
//     over ONE Process stream, never holding more events outstanding than the
//     sink's credit; stops once N results came back. Prints one JSON line:
//       {"events":N,"seconds":S,"rate":R,"cpu_s":C,"peak_rss_kib":K,
//        "messages":M,"mean_batch":B,"credit":K,"batch":B}
//     seconds: from the first record consumed to the last result received.
//
// Threading (forward): the main thread consumes and writes; one thread reads
// the stream (gRPC allows one reader and one writer at a time). They share
// the credit and result counters under Forwarder::mu_.
#include <pthread.h>
#include <signal.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "bench/bench_common.h"
#include "bench/bench_kafka.h"
#include "bench/floor_sink.h"
#include "ferry/v1/processor.grpc.pb.h"
#include "grpcpp/grpcpp.h"

ABSL_FLAG(std::string, mode, "", "forward | sink");
ABSL_FLAG(std::string, listen, "127.0.0.1:0", "sink: address to serve on (port 0: any).");
ABSL_FLAG(std::string, port_file, "", "sink: if set, write the bound port here.");
ABSL_FLAG(int, credit, 256, "sink: the credit it grants (Ready.max_in_flight).");
ABSL_FLAG(std::string, target, "", "forward: the sink's gRPC target.");
ABSL_FLAG(std::string, bootstrap, "", "forward: bootstrap servers.");
ABSL_FLAG(std::string, topic, "", "forward: topic to read.");
ABSL_FLAG(std::string, group, "", "forward: consumer group (default: a fresh one).");
ABSL_FLAG(int64_t, count, 0, "forward: stop after this many results.");
ABSL_FLAG(int, batch, 64, "forward: the most events in one Events message.");
ABSL_FLAG(std::string, kafka, "",
          "forward: extra librdkafka properties, name=value[,name=value...].");
ABSL_FLAG(std::string, ready_file, "", "forward: written once partitions are assigned.");
ABSL_FLAG(int64_t, timeout_s, 600, "forward: give up after this many seconds.");

namespace {

using ferry::v1::ProcessRequest;
using ferry::v1::ProcessResponse;


int64_t MonotonicMicros() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000 + ts.tv_nsec / 1000;
}

// ------------------------------------------------------------------ sink

int RunSink() {
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  ferry::bench::FloorSink sink(static_cast<uint32_t>(std::max(1, absl::GetFlag(FLAGS_credit))));
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(absl::GetFlag(FLAGS_listen), grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&sink);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr) {
    std::fprintf(stderr, "transport_floor sink: cannot serve on %s\n",
                 absl::GetFlag(FLAGS_listen).c_str());
    return 1;
  }
  const std::string port_file = absl::GetFlag(FLAGS_port_file);
  if (!port_file.empty() &&
      !ferry::bench::WriteFileAtomically(port_file, absl::StrCat(port, "\n"))) {
    std::fprintf(stderr, "transport_floor sink: cannot write %s\n", port_file.c_str());
    return 1;
  }
  int sig = 0;
  while (sigwait(&stop_signals, &sig) != 0) {
  }
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  std::printf("{\"cpu_s\":%.3f,\"peak_rss_kib\":%lld}\n", ferry::bench::ProcessCpuSeconds(),
              static_cast<long long>(ferry::bench::PeakRssKib()));
  return 0;
}

// ------------------------------------------------------------------ forward

using Stream = grpc::ClientReaderWriter<ProcessRequest, ProcessResponse>;

class Forwarder {
 public:
  Forwarder(RdKafka::KafkaConsumer* consumer, std::string topic, int64_t count, int batch)
      : consumer_(consumer), topic_(std::move(topic)), count_(count), batch_(batch) {}

  // Forwards `count` records over `stream` and waits for their results; on
  // failure cancels `context` so that the reader thread ends.
  absl::Status Run(grpc::ClientContext* context, Stream* stream, absl::Time deadline);
  std::string Json(double cpu_s) const;

 private:
  // The reader thread: Ready and Credit grant credit, Results count answers.
  void ReadResponses(Stream* stream);
  // Blocks until credit is free (returns how much) or the stream ended or
  // the deadline passed (returns 0).
  int64_t WaitForCredit(absl::Time deadline);
  // Fills `events` with up to `limit` records; the first consume waits up to
  // 100 ms, the rest take only what librdkafka already fetched.
  int FillBatch(int limit, ferry::v1::Events* events);
  bool CreditOrEnd() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return granted_ > sent_ || ended_;
  }
  bool AllAnsweredOrEnd() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return answered_ >= count_ || ended_;
  }

  RdKafka::KafkaConsumer* const consumer_;
  const std::string topic_;
  const int64_t count_;
  const int batch_;
  int64_t messages_ = 0;   // main thread only
  int64_t first_us_ = 0;   // main thread only: first record consumed

  mutable absl::Mutex mu_;
  int64_t sent_ ABSL_GUARDED_BY(mu_) = 0;      // events written
  int64_t granted_ ABSL_GUARDED_BY(mu_) = 0;   // credit granted in total
  int64_t answered_ ABSL_GUARDED_BY(mu_) = 0;  // results received
  int64_t not_ok_ ABSL_GUARDED_BY(mu_) = 0;    // results other than OK
  int64_t last_result_us_ ABSL_GUARDED_BY(mu_) = 0;
  bool ended_ ABSL_GUARDED_BY(mu_) = false;    // the stream's read side closed
  int64_t initial_credit_ ABSL_GUARDED_BY(mu_) = 0;  // Ready.max_in_flight
};

void Forwarder::ReadResponses(Stream* stream) {
  ProcessResponse response;
  while (stream->Read(&response)) {
    absl::MutexLock lock(&mu_);
    if (response.has_ready()) {
      granted_ += response.ready().max_in_flight();
      initial_credit_ = response.ready().max_in_flight();
    } else if (response.has_credit()) {
      granted_ += response.credit().n();
    } else if (response.has_results()) {
      for (const ferry::v1::Result& result : response.results().results()) {
        if (result.status() != ferry::v1::Result::OK) ++not_ok_;
      }
      answered_ += response.results().results_size();
      granted_ += response.results().credit();
      last_result_us_ = MonotonicMicros();
    }
  }
  absl::MutexLock lock(&mu_);
  ended_ = true;
}

int64_t Forwarder::WaitForCredit(absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  mu_.AwaitWithDeadline(absl::Condition(this, &Forwarder::CreditOrEnd), deadline);
  return ended_ ? 0 : std::max<int64_t>(0, granted_ - sent_);
}

int Forwarder::FillBatch(int limit, ferry::v1::Events* events) {
  events->Clear();  // keeps the Event objects allocated for reuse
  int64_t id_base;
  {
    absl::MutexLock lock(&mu_);
    id_base = sent_;
  }
  while (events->events_size() < limit) {
    const int wait_ms = events->events_size() == 0 ? 100 : 0;
    std::unique_ptr<RdKafka::Message> message(consumer_->consume(wait_ms));
    if (message->err() == RdKafka::ERR__TIMED_OUT) break;
    if (message->err() != RdKafka::ERR_NO_ERROR) {
      std::fprintf(stderr, "transport_floor: %s\n", message->errstr().c_str());
      break;
    }
    if (first_us_ == 0) first_us_ = MonotonicMicros();
    ferry::v1::Event* event = events->add_events();
    event->set_id(static_cast<uint64_t>(id_base + events->events_size()));
    event->set_topic(topic_);
    event->set_partition(message->partition());
    event->set_offset(message->offset());
    if (message->key_pointer() != nullptr) {
      event->set_key(message->key_pointer(), message->key_len());
    } else {
      event->clear_key();
    }
    event->set_payload(message->payload(), message->len());
    event->set_timestamp_ms(message->timestamp().timestamp);
    event->set_attempt(1);
  }
  return events->events_size();
}

absl::Status Forwarder::Run(grpc::ClientContext* context, Stream* stream, absl::Time deadline) {
  std::thread reader([this, stream] { ReadResponses(stream); });
  ProcessRequest request;
  int64_t sent = 0;
  absl::Status status;
  while (sent < count_) {
    const int64_t credit = WaitForCredit(deadline);
    if (credit == 0) {
      status = absl::DeadlineExceededError(
          absl::StrCat("no credit (stream ended or timed out) after ", sent, " events"));
      break;
    }
    const int limit = static_cast<int>(std::min<int64_t>({credit, batch_, count_ - sent}));
    const int n = FillBatch(limit, request.mutable_events());
    if (n > 0) {
      {
        absl::MutexLock lock(&mu_);
        sent_ += n;
      }
      sent += n;
      ++messages_;
      if (!stream->Write(request)) {
        status = absl::UnavailableError("the stream broke");
        break;
      }
    } else if (absl::Now() > deadline) {
      status = absl::DeadlineExceededError(absl::StrCat("timed out after ", sent, " events"));
      break;
    }
  }
  if (status.ok()) {
    absl::MutexLock lock(&mu_);
    mu_.AwaitWithDeadline(absl::Condition(this, &Forwarder::AllAnsweredOrEnd), deadline);
    if (answered_ < count_) {
      status = absl::DeadlineExceededError(absl::StrCat(answered_, " of ", count_, " answered"));
    }
  }
  if (status.ok()) {
    stream->WritesDone();  // the sink ends the stream, which ends the reader
  } else {
    context->TryCancel();
  }
  reader.join();
  return status;
}

std::string Forwarder::Json(double cpu_s) const {
  absl::MutexLock lock(&mu_);
  const double seconds = static_cast<double>(last_result_us_ - first_us_) / 1e6;
  return absl::StrFormat(
      "{\"events\":%d,\"seconds\":%.3f,\"rate\":%.0f,\"cpu_s\":%.3f,\"peak_rss_kib\":%d,"
      "\"messages\":%d,\"mean_batch\":%.1f,\"credit\":%d,\"batch\":%d,\"not_ok\":%d}",
      answered_, seconds, seconds > 0 ? static_cast<double>(answered_ - 1) / seconds : 0.0, cpu_s,
      ferry::bench::PeakRssKib(), messages_,
      messages_ > 0 ? static_cast<double>(sent_) / static_cast<double>(messages_) : 0.0,
      initial_credit_, batch_, not_ok_);
}

int RunForward() {
  const int64_t count = absl::GetFlag(FLAGS_count);
  const std::string target = absl::GetFlag(FLAGS_target);
  if (count <= 0 || target.empty()) {
    std::fprintf(stderr, "transport_floor forward: need --target and --count > 0\n");
    return 2;
  }
  ferry::bench::ConsumerOptions options;
  options.bootstrap = absl::GetFlag(FLAGS_bootstrap);
  options.topic = absl::GetFlag(FLAGS_topic);
  options.group = absl::GetFlag(FLAGS_group);
  options.client_id = "ferry-bench-floor";
  options.ready_file = absl::GetFlag(FLAGS_ready_file);
  options.extra = ferry::bench::SplitProperties(absl::GetFlag(FLAGS_kafka));
  auto consumer = ferry::bench::BenchConsumer::Create(options);
  if (!consumer.ok()) {
    std::fprintf(stderr, "transport_floor forward: %s\n", consumer.status().ToString().c_str());
    return 1;
  }
  auto channel = grpc::CreateChannel(target, grpc::InsecureChannelCredentials());
  auto stub = ferry::v1::Processor::NewStub(channel);
  grpc::ClientContext context;
  context.AddMetadata(ferry::bench::kResultsCreditHeader, "1");
  std::unique_ptr<Stream> stream = stub->Process(&context);
  Forwarder forwarder((*consumer)->consumer(), options.topic, count,
                      std::max(1, absl::GetFlag(FLAGS_batch)));
  const absl::Time deadline = absl::Now() + absl::Seconds(absl::GetFlag(FLAGS_timeout_s));
  const absl::Status status = forwarder.Run(&context, stream.get(), deadline);
  const grpc::Status finished = stream->Finish();
  std::printf("%s\n", forwarder.Json(ferry::bench::ProcessCpuSeconds()).c_str());
  std::fflush(stdout);
  if (!status.ok()) {
    std::fprintf(stderr, "transport_floor forward: %s\n", status.ToString().c_str());
    return 1;
  }
  if (!finished.ok()) {
    std::fprintf(stderr, "transport_floor forward: stream: %s\n", finished.error_message().c_str());
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const std::string mode = absl::GetFlag(FLAGS_mode);
  if (mode == "sink") return RunSink();
  if (mode == "forward") return RunForward();
  std::fprintf(stderr, "transport_floor: --mode must be forward or sink\n");
  return 2;
}
