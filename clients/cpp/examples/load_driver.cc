// load_driver: ferry's side of the Processor protocol at full speed, to
// measure a worker's CPU per event without Kafka or ferry (the C++ SDK's
// per-event cost, issue 17). It opens one stream (with
// `ferry-results-credit: 1`, as ferry does), keeps the worker's whole credit
// in flight in Events messages of --batch events (200-byte payloads, like
// bench/), and reads results until --events were answered. With --run K,
// each message's events form runs of K (Event.run_id), as a KEY lane would
// send them to a worker that set Ready.max_run.
//
//   load_driver --target 127.0.0.1:PORT --events 200000 [--batch 64] [--run 0]
//               [--worker_pid PID]
//
// Prints one line: events, seconds, events/s and, with --worker_pid, the
// worker's CPU (user + system, from /proc/PID/stat) per event in µs.
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include <grpcpp/grpcpp.h>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "ferry/v1/processor.grpc.pb.h"

ABSL_FLAG(std::string, target, "127.0.0.1:50051", "The worker's address.");
ABSL_FLAG(int64_t, events, 200000, "Events to send.");
ABSL_FLAG(int, batch, 64, "Events per Events message.");
ABSL_FLAG(int, run, 0, "Run length (0: independent events).");
ABSL_FLAG(int, worker_pid, 0, "Measure this process's CPU time (0: do not).");

namespace {

using ferry::v1::ProcessRequest;
using ferry::v1::ProcessResponse;

// utime + stime of `pid`, in seconds; -1 if unreadable.
double CpuSeconds(int pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(f, line)) return -1;
  // Fields after the command name (which may hold spaces) in parentheses.
  std::istringstream rest(line.substr(line.rfind(')') + 2));
  std::string field;
  double utime = 0, stime = 0;
  for (int i = 3; i <= 15 && rest >> field; ++i) {
    if (i == 14) utime = std::stod(field);
    if (i == 15) stime = std::stod(field);
  }
  return (utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

// The worker's credit and answers, shared by the thread reading the stream
// and the loop sending events.
class CreditWindow {
 public:
  explicit CreditWindow(int64_t credit) : credit_(credit) {}

  // Reader: adds what `in` grants and answers. False once `total` events
  // were answered (nothing more to read).
  bool Read(const ProcessResponse& in, int64_t total) {
    absl::MutexLock l(&mu_);
    if (in.has_credit()) credit_ += in.credit().n();
    if (in.has_results()) {
      credit_ += in.results().credit();
      answered_ += in.results().results_size();
    }
    return answered_ < total;
  }
  // Reader: the stream ended before every event was answered.
  void Break() {
    absl::MutexLock l(&mu_);
    broken_ = true;
  }
  // Sender: waits for credit and takes up to `most` of it into `*n`; false
  // if the stream broke instead.
  bool Take(int64_t most, int64_t* n) {
    absl::MutexLock l(&mu_);
    mu_.Await(absl::Condition(this, &CreditWindow::CanSend));
    if (broken_) return false;
    *n = std::min(credit_, most);
    credit_ -= *n;
    return true;
  }
  int64_t answered() {
    absl::MutexLock l(&mu_);
    return answered_;
  }

 private:
  bool CanSend() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return credit_ > 0 || broken_; }

  absl::Mutex mu_;
  int64_t credit_ ABSL_GUARDED_BY(mu_);
  int64_t answered_ ABSL_GUARDED_BY(mu_) = 0;
  bool broken_ ABSL_GUARDED_BY(mu_) = false;
};

using Stream = grpc::ClientReaderWriter<ProcessRequest, ProcessResponse>;

// Sends `total` events in messages of up to `batch`, as the window's credit
// allows (runs of `run` when above 1), until they are sent or the stream
// breaks.
void SendEvents(Stream& stream, CreditWindow& window, int64_t total, int batch, int run) {
  const std::string payload(200, 'x');
  int64_t sent = 0;
  uint64_t run_id = 0;
  ProcessRequest req;
  while (sent < total) {
    int64_t n = 0;
    if (!window.Take(std::min<int64_t>(batch, total - sent), &n)) break;
    auto* events = req.mutable_events();
    events->Clear();
    for (int64_t i = 0; i < n; ++i, ++sent) {
      ferry::v1::Event* e = events->add_events();
      e->set_id(static_cast<uint64_t>(sent) + 1);
      e->set_topic("bench");
      e->set_partition(static_cast<int32_t>(sent % 8));
      e->set_offset(sent);
      e->set_key("key-" + std::to_string(sent % 10000));
      e->set_type("bench");
      e->set_payload(payload);
      e->set_timestamp_ms(1);
      e->set_attempt(1);
      if (run > 1) {
        if (i % run == 0) ++run_id;
        e->set_run_id(run_id);
      }
    }
    if (!stream.Write(req)) break;
  }
}

// The one output line (see the top of this file).
void PrintResult(int64_t answered, absl::Duration took, int pid, double cpu) {
  std::printf("events=%lld seconds=%.3f events_per_s=%.0f", static_cast<long long>(answered),
              absl::ToDoubleSeconds(took),
              static_cast<double>(answered) / absl::ToDoubleSeconds(took));
  if (pid > 0) {
    std::printf(" worker_cpu_s=%.3f worker_cpu_us_per_event=%.3f", cpu,
                cpu * 1e6 / static_cast<double>(answered));
  }
  std::printf("\n");
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const int64_t total = absl::GetFlag(FLAGS_events);
  const int pid = absl::GetFlag(FLAGS_worker_pid);

  auto channel =
      grpc::CreateChannel(absl::GetFlag(FLAGS_target), grpc::InsecureChannelCredentials());
  auto stub = ferry::v1::Processor::NewStub(channel);
  grpc::ClientContext context;
  context.AddMetadata("ferry-results-credit", "1");
  auto stream = stub->Process(&context);
  ProcessResponse msg;
  if (!stream->Read(&msg) || !msg.has_ready()) {
    std::fprintf(stderr, "load_driver: no Ready from the worker\n");
    return 1;
  }

  CreditWindow window(msg.ready().max_in_flight());
  std::thread reader([&] {
    ProcessResponse in;
    while (stream->Read(&in)) {
      if (!window.Read(in, total)) return;
    }
    window.Break();
  });
  const double cpu0 = pid > 0 ? CpuSeconds(pid) : 0;
  const absl::Time t0 = absl::Now();
  SendEvents(*stream, window, total, absl::GetFlag(FLAGS_batch), absl::GetFlag(FLAGS_run));
  reader.join();
  const absl::Duration took = absl::Now() - t0;
  const double cpu = pid > 0 ? CpuSeconds(pid) - cpu0 : 0;
  stream->WritesDone();
  context.TryCancel();
  const int64_t answered = window.answered();
  PrintResult(answered, took, pid, cpu);
  return answered >= total ? 0 : 1;
}
