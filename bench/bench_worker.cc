// bench_worker: the no-op ferry worker of the benchmark (bench/README.md),
// built on the C++ SDK (//clients/cpp:worker). Its handler answers OK at once
// (or after --work_us of sleep: the slow worker of the memory check) and
// measures, for values of kind 'T' (bench/bench_common.h), the latency from
// the value's send time (wall clock, written by bench_produce) to the
// handler: produce -> broker -> ferry -> gRPC -> handler ("latency"), and
// from Event.timestamp_ms, the broker's LogAppendTime on the latency topics,
// to the handler ("append_latency": broker -> ferry -> gRPC -> handler; 1 ms
// resolution, so up to 1 ms high).
//
//   bench_worker --listen 127.0.0.1:0 --port_file F --stats F
//                [--max_in_flight 256] [--handler_threads 2] [--work_us 0]
//                [--inline_handlers=true]
//
// --stats is rewritten (atomically) every --stats_interval_ms and on exit:
//   {"events":N,"first_wall_us":..,"last_wall_us":..,"cpu_s":..,
//    "peak_rss_kib":..,"credit_violations":..,"events_messages":..,
//    "results_messages":..,"latency":{...},"append_latency":{...}}
// first/last_wall_us: wall clock of the first and latest handler call;
// events/results_messages: Events messages read, Results messages written.
// --slow_log F [--slow_us 20000]: one line per kind 'T' event whose append
// latency passed the threshold (handler wall us, latency us, partition, offset).
// SIGTERM / SIGINT: graceful shutdown (2 s grace), final stats, exit 0.
#include <pthread.h>
#include <signal.h>
#include <time.h>

#include <atomic>
#include <cstdio>
#include <string>
#include <thread>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "bench/bench_common.h"
#include "clients/cpp/worker.h"

ABSL_FLAG(std::string, listen, "127.0.0.1:0", "Address to serve on (port 0: any).");
ABSL_FLAG(std::string, port_file, "", "If set, write the bound port here.");
ABSL_FLAG(std::string, stats, "", "If set, write the stats JSON here.");
ABSL_FLAG(int64_t, stats_interval_ms, 200, "How often --stats is rewritten.");
ABSL_FLAG(int, max_in_flight, 256, "Credit per stream.");
ABSL_FLAG(int, handler_threads, 2, "Threads running the handler.");
ABSL_FLAG(int64_t, work_us, 0, "Sleep per event, microseconds (a slow worker).");
ABSL_FLAG(bool, inline_handlers, true,
          "WorkerOptions::inline_handlers: the no-op handler never blocks, so it runs on "
          "the SDK's stream thread; off with --work_us (a sleeping handler must not hold it).");
ABSL_FLAG(std::string, slow_log, "",
          "If set, append \"<handler wall us>\t<append latency us>\t<partition>\t<offset>\" for "
          "kind 'T' events slower than --slow_us (to see when latency spikes happen).");
ABSL_FLAG(int64_t, slow_us, 20000, "Threshold of --slow_log, microseconds.");

namespace {

ferry::bench::LatencyHistogram* latency = nullptr;
ferry::bench::LatencyHistogram* append_latency = nullptr;
std::atomic<int64_t> events{0};
std::atomic<int64_t> first_wall_us{0};
std::atomic<int64_t> last_wall_us{0};
FILE* slow_log = nullptr;
int64_t slow_us = 0;
absl::Mutex slow_mu;

ferry::sdk::Outcome Handle(const ferry::v1::Event& event, int64_t work_us) {
  const int64_t now = ferry::bench::WallMicros();
  if (events.fetch_add(1, std::memory_order_relaxed) == 0) {
    int64_t zero = 0;
    first_wall_us.compare_exchange_strong(zero, now);
  }
  int64_t seen = last_wall_us.load(std::memory_order_relaxed);
  while (now > seen && !last_wall_us.compare_exchange_weak(seen, now)) {
  }
  char kind;
  int64_t send_us;
  if (ferry::bench::ParsePayload(event.payload(), &kind, &send_us) && kind == 'T') {
    latency->Record(now - send_us);
    if (event.timestamp_ms() > 0) {
      const int64_t micros = now - event.timestamp_ms() * 1000;
      append_latency->Record(micros);
      if (slow_log != nullptr && micros > slow_us) {
        absl::MutexLock lock(&slow_mu);
        std::fprintf(slow_log, "%lld\t%lld\t%d\t%lld\n", static_cast<long long>(now),
                     static_cast<long long>(micros), event.partition(),
                     static_cast<long long>(event.offset()));
      }
    }
  }
  if (work_us > 0) {
    timespec ts{static_cast<time_t>(work_us / 1000000), static_cast<long>(work_us % 1000000) * 1000};
    nanosleep(&ts, nullptr);
  }
  return ferry::sdk::Outcome::Ok();
}

std::string StatsJson(const ferry::sdk::Worker& worker) {
  return absl::StrFormat(
      "{\"events\":%d,\"first_wall_us\":%d,\"last_wall_us\":%d,\"cpu_s\":%.3f,"
      "\"peak_rss_kib\":%d,\"credit_violations\":%d,\"events_messages\":%d,"
      "\"results_messages\":%d,\"latency\":%s,\"append_latency\":%s}\n",
      events.load(), first_wall_us.load(), last_wall_us.load(), ferry::bench::ProcessCpuSeconds(),
      ferry::bench::PeakRssKib(), worker.credit_violations(), worker.events_messages(),
      worker.results_messages(), latency->Json(), append_latency->Json());
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  // As worker.h recommends (and example_worker does): Debian's abseil would
  // run its deadlock-cycle detector on every Mutex lock of the SDK.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  latency = new ferry::bench::LatencyHistogram();
  if (const std::string path = absl::GetFlag(FLAGS_slow_log); !path.empty()) {
    slow_log = std::fopen(path.c_str(), "w");
    slow_us = absl::GetFlag(FLAGS_slow_us);
  }
  append_latency = new ferry::bench::LatencyHistogram();
  ferry::sdk::WorkerOptions options;
  options.name = "bench-worker";
  options.max_in_flight = absl::GetFlag(FLAGS_max_in_flight);
  options.handler_threads = absl::GetFlag(FLAGS_handler_threads);
  const int64_t work_us = absl::GetFlag(FLAGS_work_us);
  options.inline_handlers = absl::GetFlag(FLAGS_inline_handlers) && work_us == 0;
  auto worker = ferry::sdk::Worker::Create(
      options, [work_us](const ferry::v1::Event& event) { return Handle(event, work_us); });
  if (!worker.ok()) {
    std::fprintf(stderr, "bench_worker: %s\n", worker.status().ToString().c_str());
    return 1;
  }
  const absl::Status started = (*worker)->Start(absl::GetFlag(FLAGS_listen));
  if (!started.ok()) {
    std::fprintf(stderr, "bench_worker: %s\n", started.ToString().c_str());
    return 1;
  }
  const std::string port_file = absl::GetFlag(FLAGS_port_file);
  if (!port_file.empty() &&
      !ferry::bench::WriteFileAtomically(port_file, absl::StrCat((*worker)->port(), "\n"))) {
    std::fprintf(stderr, "bench_worker: cannot write %s\n", port_file.c_str());
    return 1;
  }

  const std::string stats = absl::GetFlag(FLAGS_stats);
  std::atomic<bool> stopping{false};
  std::thread stats_thread([&] {
    const absl::Duration interval = absl::Milliseconds(absl::GetFlag(FLAGS_stats_interval_ms));
    while (!stopping.load()) {
      if (!stats.empty()) ferry::bench::WriteFileAtomically(stats, StatsJson(**worker));
      absl::SleepFor(interval);
    }
  });

  int sig = 0;
  while (sigwait(&stop_signals, &sig) != 0) {
  }
  (*worker)->Shutdown(absl::Seconds(2));
  stopping.store(true);
  stats_thread.join();
  if (!stats.empty()) ferry::bench::WriteFileAtomically(stats, StatsJson(**worker));
  if (slow_log != nullptr) {
    absl::MutexLock lock(&slow_mu);
    std::fclose(slow_log);
    slow_log = nullptr;
  }
  return 0;
}
