// example_worker: a ferry processor that acks every event, with the knobs that
// end-to-end tests, benchmarks and the k8s example need.
//
// The processor itself is HandleEvent() below; everything else is plumbing:
//   --listen ADDR        address to serve on (default 127.0.0.1:50051; port 0 = any)
//   --max_in_flight N    credit per stream (default 64)
//   --max_run N          the most events of one lane ferry may send as a run, handled in
//                        order (default: the SDK's, WorkerOptions::max_run; 0 or 1: no runs)
//   --handler_threads N  threads running the handler (default 4)
//   --name NAME          worker name sent in Ready (default: host name)
//   --work_us N          simulated work per event, microseconds (default 0)
//   --record FILE        append "<key>\t<payload>\t<CLOCK_MONOTONIC ns at handler start>\t
//                        <partition>\t<offset>\n" per event (buffered, flushed on shutdown;
//                        '\\', tab, CR and LF inside key/payload are escaped as \\ \t \r \n)
//   --record_flush       write each --record line through before answering (kill -9 safe)
//   --record_starts FILE one line "<key>\t<payload>\t<CLOCK_MONOTONIC ns>" written through as
//                        each handler run starts (before any work: survives a kill mid-run)
//   --stats FILE         on shutdown write "events_received=N\nmax_held=M\ncredit_violations=K\n
//                        cancelled=C\nlatency_count=L\nlatency_p50_us=P\nlatency_p99_us=Q\n
//                        service_p50_us=S\nservice_p99_us=T\n" (C: handler runs that saw
//                        ferry's Cancel for their event; L, P, Q: handler runs and their
//                        latency quantiles, wait for a --pool_size slot included; S, T: those
//                        of --work_us as slept, the latency when nothing waits; quantiles
//                        within 2%)
//   --port_file FILE     after binding, write the port (atomically: temp file + rename)
//   --tls_cert FILE, --tls_key FILE   serve TLS with this PEM certificate chain and key
//   --tls_client_ca FILE require clients (ferry) to present a certificate signed by this
//                        PEM CA (mTLS; needs --tls_cert and --tls_key)
// Fault injection, for failure and chaos tests (all off by default):
//   --retry_attempts K   answer RETRY until the event's attempt reaches K
//   --fail_every N       answer FAIL when (payload as an integer + 1) % N == 0
//   --throw_every N      throw from the handler when (payload as an integer + 1) % N == 0
//                        (the SDK reports it as FAIL; recorded as FAIL)
//   --fail_rate P, --retry_rate P, --stall_rate P   random FAIL / RETRY / stall
//   --stall_ms MS        how long a stall holds the event (default 2000); a stall ends
//                        early when ferry cancels the event (the handler then answers FAIL,
//                        which the SDK drops)
//   --seed S             seed of the random choices
// A simulated downstream (downstream_sim.h; both off by default):
//   --pool_size N        a database with N connections: each event holds one for --work_us
//                        and waits for a free one first, so latency grows with the events
//                        handled at once beyond N (give --handler_threads enough threads)
//   --pool_jitter J      each pooled event's work is uniform over --work_us x (1 +- J)
//   --unavailable_ms N   answer RETRY (retry_after --unavailable_retry_after_ms) to every event
//                        handled within N ms of the first one this worker handled, then
//                        recover: a downstream that is down for N ms
// The --record line gets a sixth column with the answer: OK, RETRY or FAIL.
// SIGTERM / SIGINT: graceful shutdown with a 5 s grace, then exit 0.
// tests/conformance runs this worker and the Python, Go and plain-gRPC ones
// with the same flags and checks the same scenarios against each.
#include <pthread.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "clients/cpp/examples/downstream_sim.h"
#include "clients/cpp/worker.h"

ABSL_FLAG(std::string, listen, "127.0.0.1:50051", "Address to serve on (port 0: any free port).");
ABSL_FLAG(int, max_in_flight, 64, "Credit per stream: events ferry may have outstanding.");
ABSL_FLAG(int, max_run, ferry::sdk::WorkerOptions().max_run,
          "The most events of one lane ferry may send as a run (0 or 1: no runs).");
ABSL_FLAG(int, handler_threads, 4, "Threads running the handler.");
ABSL_FLAG(std::string, name, "", "Worker name reported to ferry (default: host name).");
ABSL_FLAG(std::string, record, "", "If set, append one line per handled event to this file.");
ABSL_FLAG(std::string, record_starts, "",
          "If set, write one line per handler start to this file, written through at once.");
ABSL_FLAG(bool, record_flush, false,
          "Write each --record line through before answering (survives kill -9).");
ABSL_FLAG(std::string, stats, "", "If set, write counters to this file on shutdown.");
ABSL_FLAG(int64_t, work_us, 0, "Simulated work per event, in microseconds.");
ABSL_FLAG(std::string, port_file, "", "If set, write the bound port to this file.");
ABSL_FLAG(std::string, tls_cert, "", "Serve TLS with this PEM certificate chain (and --tls_key).");
ABSL_FLAG(std::string, tls_key, "", "PEM private key of --tls_cert.");
ABSL_FLAG(std::string, tls_client_ca, "",
          "Require client certificates signed by this PEM CA (mTLS; needs --tls_cert).");
ABSL_FLAG(int, retry_attempts, 0, "Answer RETRY until the event's attempt reaches this.");
ABSL_FLAG(int64_t, fail_every, 0, "Answer FAIL when (payload as an integer + 1) % N == 0.");
ABSL_FLAG(int64_t, throw_every, 0,
          "Throw from the handler when (payload as an integer + 1) % N == 0 (the SDK reports FAIL).");
ABSL_FLAG(double, fail_rate, 0, "Probability of answering FAIL.");
ABSL_FLAG(double, retry_rate, 0, "Probability of answering RETRY.");
ABSL_FLAG(double, stall_rate, 0, "Probability of holding an event for --stall_ms first.");
ABSL_FLAG(int64_t, stall_ms, 2000, "How long a stalled event is held.");
ABSL_FLAG(uint64_t, seed, 1, "Seed of the random fault choices.");
ABSL_FLAG(int, pool_size, 0,
          "Simulated database pool: each event holds one of N slots for --work_us (0: off).");
ABSL_FLAG(double, pool_jitter, 0,
          "Spread each --pool_size event's work uniformly over --work_us x (1 +- J), 0..1.");
ABSL_FLAG(int64_t, unavailable_ms, 0,
          "Answer RETRY to every event handled within N ms of the first one (0: off).");
ABSL_FLAG(int64_t, unavailable_retry_after_ms, 0,
          "The retry_after of --unavailable_ms's RETRY answers (0: ferry's own backoff).");

namespace {

// Appends one line per event; many handler threads share it.
class Recorder {
 public:
  bool Open(const std::string& path, bool flush_each_line) {
    file_ = std::fopen(path.c_str(), "a");
    if (file_ == nullptr) return false;
    flush_each_line_ = flush_each_line;
    std::setvbuf(file_, nullptr, _IOFBF, 1 << 20);
    return true;
  }
  void Record(const ferry::v1::Event& e, int64_t start_ns, const char* answer) {
    std::string line = absl::StrCat(Escape(e.key()), "\t", Escape(e.payload()), "\t", start_ns,
                                    "\t", e.partition(), "\t", e.offset(), "\t", answer, "\n");
    absl::MutexLock l(&mu_);
    if (file_ == nullptr) return;
    std::fwrite(line.data(), 1, line.size(), file_);
    // In the kernel before the answer leaves, so a kill -9 loses no line
    // of an answered event.
    if (flush_each_line_) std::fflush(file_);
  }
  void Close() {
    absl::MutexLock l(&mu_);
    if (file_ != nullptr) std::fclose(file_);  // flushes
    file_ = nullptr;
  }

 private:
  static std::string Escape(const std::string& s) {
    std::string out;
    out.reserve(s.size());
    for (char c : s) {
      switch (c) {
        case '\\': out += "\\\\"; break;
        case '\t': out += "\\t"; break;
        case '\n': out += "\\n"; break;
        case '\r': out += "\\r"; break;
        default: out += c;
      }
    }
    return out;
  }

  absl::Mutex mu_;
  std::FILE* file_ = nullptr;
  bool flush_each_line_ = false;
};

Recorder* recorder = nullptr;  // set when --record is given
std::FILE* starts_file = nullptr;  // set when --record_starts is given
absl::Mutex starts_mu;
absl::Duration work = absl::ZeroDuration();
ferry::sdk::Worker* the_worker = nullptr;  // set before Start: handlers ask it about Cancel
std::atomic<int64_t> cancelled_runs{0};    // handler runs that saw their event cancelled
ferry::examples::SimulatedPool* pool = nullptr;      // set when --pool_size is given
ferry::examples::Outage* outage = nullptr;           // set when --unavailable_ms is given
ferry::examples::LatencyHistogram handler_latency;  // every handler run
ferry::examples::LatencyHistogram service_time;     // --work_us as slept, without the wait
absl::Duration unavailable_retry_after = absl::ZeroDuration();

bool IsCancelled(const ferry::v1::Event& event) {
  return the_worker != nullptr && the_worker->IsCancelled(event.id());
}

// Holds the event for `stall`, or until ferry cancels it. True if cancelled.
bool Stall(const ferry::v1::Event& event, absl::Duration stall) {
  const absl::Time end = absl::Now() + stall;
  while (!IsCancelled(event)) {
    const absl::Duration left = end - absl::Now();
    if (left <= absl::ZeroDuration()) return false;
    absl::SleepFor(std::min(left, absl::Milliseconds(5)));  // polling IsCancelled
  }
  return true;
}

int64_t MonotonicNanos() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

// Fault injection for tests; see the flags. Thread-safe.
class Faults {
 public:
  void Configure() {
    retry_attempts_ = absl::GetFlag(FLAGS_retry_attempts);
    fail_every_ = absl::GetFlag(FLAGS_fail_every);
    throw_every_ = absl::GetFlag(FLAGS_throw_every);
    fail_rate_ = absl::GetFlag(FLAGS_fail_rate);
    retry_rate_ = absl::GetFlag(FLAGS_retry_rate);
    stall_rate_ = absl::GetFlag(FLAGS_stall_rate);
    stall_ = absl::Milliseconds(absl::GetFlag(FLAGS_stall_ms));
    absl::MutexLock lock(&mu_);
    random_.seed(absl::GetFlag(FLAGS_seed));
  }
  // nullopt: process normally. *throw_it: the handler should throw.
  std::optional<ferry::sdk::Outcome> Decide(const ferry::v1::Event& event, bool* throw_it) {
    *throw_it = false;
    if (retry_attempts_ > 0 && event.attempt() < retry_attempts_) {
      return ferry::sdk::Outcome::Retry("injected: retry until attempt " +
                                        std::to_string(retry_attempts_));
    }
    int64_t sequence = 0;
    const bool numeric = absl::SimpleAtoi(event.payload(), &sequence);
    if (fail_every_ > 0 && numeric && (sequence + 1) % fail_every_ == 0) {
      return ferry::sdk::Outcome::Fail("injected: every " + std::to_string(fail_every_));
    }
    if (throw_every_ > 0 && numeric && (sequence + 1) % throw_every_ == 0) {
      *throw_it = true;
      return ferry::sdk::Outcome::Fail("injected: throw every " + std::to_string(throw_every_));
    }
    double roll;
    bool stall;
    {
      absl::MutexLock lock(&mu_);
      roll = std::uniform_real_distribution<double>(0, 1)(random_);
      stall = std::uniform_real_distribution<double>(0, 1)(random_) < stall_rate_;
    }
    if (stall && Stall(event, stall_)) return ferry::sdk::Outcome::Fail("cancelled by ferry");
    if (roll < fail_rate_) return ferry::sdk::Outcome::Fail("injected: random failure");
    if (roll < fail_rate_ + retry_rate_) return ferry::sdk::Outcome::Retry("injected: random");
    return std::nullopt;
  }

 private:
  int retry_attempts_ = 0;
  int64_t fail_every_ = 0;
  int64_t throw_every_ = 0;
  double fail_rate_ = 0;
  double retry_rate_ = 0;
  double stall_rate_ = 0;
  absl::Duration stall_;
  absl::Mutex mu_;
  std::mt19937_64 random_ ABSL_GUARDED_BY(mu_);
};
Faults faults;

const char* AnswerName(const ferry::sdk::Outcome& outcome) {
  switch (outcome.kind()) {
    case ferry::sdk::Outcome::Kind::kOk:
      return "OK";
    case ferry::sdk::Outcome::Kind::kRetry:
      return "RETRY";
    case ferry::sdk::Outcome::Kind::kFail:
      return "FAIL";
  }
  return "?";
}

// ---- The processor. This is the part to copy. ----
ferry::sdk::Outcome HandleEvent(const ferry::v1::Event& event) {
  const int64_t start_ns = MonotonicNanos();
  if (starts_file != nullptr) {
    const std::string line = absl::StrCat(event.key(), "\t", event.payload(), "\t", start_ns, "\n");
    absl::MutexLock lock(&starts_mu);
    std::fwrite(line.data(), 1, line.size(), starts_file);
    std::fflush(starts_file);
  }
  // Real work goes here. Return Outcome::Retry("why") to be called again later
  // or Outcome::Fail("why") to dead-letter the event; a throw counts as Fail.
  const absl::Time started = absl::Now();
  if (outage != nullptr && outage->Down(started)) {
    // Down: answer at once, as a service that refuses connections would.
    handler_latency.Record(absl::Now() - started);
    const ferry::sdk::Outcome down =
        ferry::sdk::Outcome::Retry("injected: unavailable", unavailable_retry_after);
    if (recorder != nullptr) recorder->Record(event, start_ns, AnswerName(down));
    return down;
  }
  if (pool != nullptr) {
    service_time.Record(pool->Call(work));
  } else if (work > absl::ZeroDuration()) {
    absl::SleepFor(work);
    service_time.Record(absl::Now() - started);
  }
  handler_latency.Record(absl::Now() - started);
  bool throw_it = false;
  const ferry::sdk::Outcome outcome =
      faults.Decide(event, &throw_it).value_or(ferry::sdk::Outcome::Ok());
  if (IsCancelled(event)) cancelled_runs.fetch_add(1, std::memory_order_relaxed);
  if (recorder != nullptr) recorder->Record(event, start_ns, AnswerName(outcome));
  if (throw_it) throw std::runtime_error(outcome.message());
  return outcome;
}

// Writes `content` to `path` via a temporary file and rename(2).
bool WriteFileAtomically(const std::string& path, const std::string& content) {
  const std::string tmp = absl::StrCat(path, ".tmp.", getpid());
  std::FILE* f = std::fopen(tmp.c_str(), "w");
  if (f == nullptr) return false;
  bool ok = std::fwrite(content.data(), 1, content.size(), f) == content.size();
  ok = (std::fclose(f) == 0) && ok;
  ok = ok && std::rename(tmp.c_str(), path.c_str()) == 0;
  if (!ok) std::remove(tmp.c_str());
  return ok;
}

// Blocks SIGTERM and SIGINT and returns them. Call it before any thread
// starts: threads inherit the mask, so only the main thread takes them,
// synchronously, with sigwait.
sigset_t BlockStopSignals() {
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  return stop_signals;
}

// The simulated downstream of --pool_size and --unavailable_ms: `database` and
// `down` own what the handler's `pool` and `outage` point to.
void SetUpDownstream(std::optional<ferry::examples::SimulatedPool>* database,
                     std::optional<ferry::examples::Outage>* down) {
  if (const int size = absl::GetFlag(FLAGS_pool_size); size > 0) {
    database->emplace(size, absl::GetFlag(FLAGS_pool_jitter), absl::GetFlag(FLAGS_seed));
    pool = &**database;
  }
  if (const int64_t ms = absl::GetFlag(FLAGS_unavailable_ms); ms > 0) {
    down->emplace(absl::Milliseconds(ms));
    outage = &**down;
    unavailable_retry_after = absl::Milliseconds(absl::GetFlag(FLAGS_unavailable_retry_after_ms));
  }
}

// Opens --record into `record_file` and --record_starts; false (said on
// stderr) when one cannot be opened.
bool OpenRecordFiles(Recorder* record_file) {
  if (const std::string path = absl::GetFlag(FLAGS_record); !path.empty()) {
    if (!record_file->Open(path, absl::GetFlag(FLAGS_record_flush))) {
      std::fprintf(stderr, "example_worker: cannot open --record %s\n", path.c_str());
      return false;
    }
    recorder = record_file;
  }
  if (const std::string path = absl::GetFlag(FLAGS_record_starts); !path.empty()) {
    starts_file = std::fopen(path.c_str(), "a");
    if (starts_file == nullptr) {
      std::fprintf(stderr, "example_worker: cannot open --record_starts %s\n", path.c_str());
      return false;
    }
  }
  return true;
}

ferry::sdk::WorkerOptions OptionsFromFlags() {
  ferry::sdk::WorkerOptions options;
  options.name = absl::GetFlag(FLAGS_name);
  options.max_in_flight = absl::GetFlag(FLAGS_max_in_flight);
  options.max_run = absl::GetFlag(FLAGS_max_run);
  options.handler_threads = absl::GetFlag(FLAGS_handler_threads);
  options.tls.cert_file = absl::GetFlag(FLAGS_tls_cert);
  options.tls.key_file = absl::GetFlag(FLAGS_tls_key);
  options.tls.client_ca_file = absl::GetFlag(FLAGS_tls_client_ca);
  return options;
}

// Starts `worker` on --listen, writes --port_file and prints the banner;
// false (said on stderr) when it cannot.
bool Serve(ferry::sdk::Worker& worker, const ferry::sdk::WorkerOptions& options) {
  const std::string listen = absl::GetFlag(FLAGS_listen);
  if (absl::Status s = worker.Start(listen); !s.ok()) {
    std::fprintf(stderr, "example_worker: %s\n", s.ToString().c_str());
    return false;
  }
  const int port = worker.port();
  if (const std::string path = absl::GetFlag(FLAGS_port_file); !path.empty()) {
    if (!WriteFileAtomically(path, std::to_string(port))) {
      std::fprintf(stderr, "example_worker: cannot write --port_file %s\n", path.c_str());
      return false;
    }
  }
  const std::string host = listen.substr(0, listen.rfind(':'));
  // The banner is the same for every example worker (tests read it); TLS is
  // reported on its own line.
  if (!options.tls.cert_file.empty()) {
    std::fprintf(stderr, "example_worker: serving %s\n",
                 options.tls.client_ca_file.empty() ? "TLS" : "mTLS (client certificates required)");
  }
  std::printf("example_worker listening on %s:%d (max_in_flight=%d)\n", host.c_str(), port,
              options.max_in_flight);
  std::fflush(stdout);
  return true;
}

// Writes --stats (the file format is in the comment at the top).
void WriteStats(const ferry::sdk::Worker& worker) {
  const std::string path = absl::GetFlag(FLAGS_stats);
  if (path.empty()) return;
  const std::string stats =
      absl::StrCat("events_received=", worker.events_received(), "\nmax_held=",
                   worker.max_held(), "\ncredit_violations=", worker.credit_violations(),
                   "\ncancelled=", cancelled_runs.load(), "\nlatency_count=",
                   handler_latency.count(),
                   "\nlatency_p50_us=", handler_latency.QuantileMicros(0.5),
                   "\nlatency_p99_us=", handler_latency.QuantileMicros(0.99),
                   "\nservice_p50_us=", service_time.QuantileMicros(0.5),
                   "\nservice_p99_us=", service_time.QuantileMicros(0.99), "\n");
  if (!WriteFileAtomically(path, stats)) {
    std::fprintf(stderr, "example_worker: cannot write --stats %s\n", path.c_str());
  }
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  // Debian's abseil is built without NDEBUG, so every Mutex lock would also
  // run absl's deadlock-cycle detector (dozens of times per event). A
  // program's main() may turn it off; the SDK library leaves it alone.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  sigset_t stop_signals = BlockStopSignals();

  work = absl::Microseconds(absl::GetFlag(FLAGS_work_us));
  faults.Configure();
  std::optional<ferry::examples::SimulatedPool> database;
  std::optional<ferry::examples::Outage> down;
  SetUpDownstream(&database, &down);
  Recorder record_file;
  if (!OpenRecordFiles(&record_file)) return 1;

  const ferry::sdk::WorkerOptions options = OptionsFromFlags();
  auto worker = ferry::sdk::Worker::Create(options, HandleEvent);
  if (!worker.ok()) {
    std::fprintf(stderr, "example_worker: %s\n", worker.status().ToString().c_str());
    return 1;
  }
  the_worker = worker->get();
  if (!Serve(**worker, options)) return 1;

  int sig = 0;
  while (sigwait(&stop_signals, &sig) != 0) {
  }
  std::fprintf(stderr, "example_worker: signal %d, shutting down\n", sig);
  (*worker)->Shutdown(absl::Seconds(5));
  record_file.Close();
  WriteStats(**worker);
  return 0;
}
