// ferry C++ worker SDK: write a Kafka event processor as a plain function.
//
// ferry (the Kafka consumer service) dials your worker and opens
// `ferry.v1.Processor/Process` bidi streams to it (see
// proto/ferry/v1/processor.proto). This library implements that protocol for
// you: it announces Ready{max_in_flight, max_run}, runs your handler for every Event on
// its own thread pool, batches the results into Results messages, returns
// credit with Credit{n}, honours Cancel, and drains gracefully on Shutdown.
//
//   ferry::sdk::WorkerOptions opts;
//   opts.name = "billing-worker";
//   auto worker = ferry::sdk::Worker::Create(opts, [](const ferry::v1::Event& e) {
//     if (e.payload().empty()) return ferry::sdk::Outcome::Fail("empty payload");
//     return ferry::sdk::Outcome::Ok();
//   });
//   if (!worker.ok() || !(*worker)->Start("0.0.0.0:50051").ok()) return 1;
//   (*worker)->Wait();  // until someone calls Shutdown()
//
// Speed: Debian's abseil (and any abseil built without NDEBUG) runs its
// deadlock-cycle detector on every absl::Mutex lock, the SDK's included;
// that cost the benchmark worker about a tenth of its CPU. The SDK leaves the
// process-wide setting alone; a worker's main() may turn it off, as the
// example and benchmark workers do:
//   absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
// Link a thread-caching malloc into the worker binary (tcmalloc: Bazel
// `@system//:tcmalloc`, or -ltcmalloc_minimal): each message is parsed on
// the stream thread and its event buffers are freed on a handler thread, which
// glibc's malloc serves slowly; tcmalloc cut the benchmark worker's CPU per
// event by about a seventh (bench/RESULTS.md). The SDK does not link it
// itself: the allocator is the binary's choice.
//
// TLS: set opts.tls.cert_file / key_file (and client_ca_file to require ferry
// to present a client certificate); ferry's processor then needs `tls:`.
//
// Threading contract
//   * The stream thread: one thread per Worker (named ferry-sdk-cq) serves
//     every Process stream through gRPC's async API: it reads and parses
//     messages, writes results and polls the sockets. It never runs a
//     handler unless WorkerOptions::inline_handlers is set.
//   * Sync handlers (Handler) run on the SDK's pool of
//     WorkerOptions::handler_threads threads, never on the stream thread (unless
//     WorkerOptions::inline_handlers is set, for handlers that never block). Several
//     events may run concurrently (also events of one stream message), so a
//     handler must be thread-safe. ferry guarantees per-key ordering by not
//     sending the next event of a key before the previous one's result, or
//     by sending a lane's next events as a run (WorkerOptions::max_run):
//     the events of one message sharing a non-zero Event.run_id. A run's
//     events are handled one at a time, in message order, each starting
//     only after the previous one ended OK (on any pool thread; for async
//     handlers, after its `done`). When one ends otherwise (RETRY, FAIL, a
//     throw, ferry's Cancel, Shutdown), every later event of the run is
//     answered NOT_ATTEMPTED without calling the handler (ferry delivers it
//     again, without counting an attempt).
//   * Async handlers (AsyncHandler) are invoked on the same pool and must
//     return quickly; `done` may be called later from any thread, exactly once.
//     A second call is ignored (and logged); dropping `done` without calling it
//     reports FAIL for that event.
//   * A handler that throws is reported as FAIL with the exception's message.
//   * The event reference passed to a handler stays valid until the handler
//     returns (sync) or until `done` is called (async).
//   * All public Worker methods are thread-safe. Shutdown() must not be called
//     from inside a handler (it waits for handlers).
//   * When ferry ends a stream (or cancels it), running handlers finish and
//     their results are dropped; its events not started yet are skipped.
//     Events cancelled by Cancel{ids} before they start are skipped too.
//   * At most max_in_flight events are held per stream while ferry respects
//     the credit it was granted; extra events are still processed but counted
//     in credit_violations().
#ifndef FERRY_CLIENTS_CPP_WORKER_H_
#define FERRY_CLIENTS_CPP_WORKER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "ferry/v1/processor.pb.h"

namespace grpc {
class Server;
}  // namespace grpc

namespace ferry::sdk {

// What a handler decided about one event.
class Outcome {
 public:
  enum class Kind { kOk, kRetry, kFail };

  // Processed; ferry may commit the offset.
  static Outcome Ok() { return Outcome(Kind::kOk, std::string(), absl::ZeroDuration()); }
  // Try again later. retry_after > 0 asks ferry to wait at least that long
  // (rounded up to whole milliseconds); zero means ferry's own backoff.
  static Outcome Retry(std::string message, absl::Duration retry_after = absl::ZeroDuration()) {
    return Outcome(Kind::kRetry, std::move(message), retry_after);
  }
  // Terminal failure: ferry dead-letters (or skips) the event and moves on.
  static Outcome Fail(std::string message) {
    return Outcome(Kind::kFail, std::move(message), absl::ZeroDuration());
  }

  Kind kind() const { return kind_; }
  const std::string& message() const { return message_; }
  absl::Duration retry_after() const { return retry_after_; }

 private:
  Outcome(Kind kind, std::string message, absl::Duration retry_after)
      : kind_(kind), message_(std::move(message)), retry_after_(retry_after) {}

  Kind kind_;
  std::string message_;
  absl::Duration retry_after_;
};

// A synchronous processor: called once per event on an SDK pool thread.
using Handler = std::function<Outcome(const ferry::v1::Event&)>;
// An asynchronous processor: must call `done` exactly once, from any thread.
using AsyncHandler =
    std::function<void(const ferry::v1::Event&, std::function<void(Outcome)> done)>;

// TLS for the worker's port (what ferry's `processors[].tls` dials). PEM
// files, read when Start() is called.
struct WorkerTls {
  // This worker's certificate chain and private key. Empty: plaintext.
  std::string cert_file;
  std::string key_file;
  // Set: every client (ferry) must present a certificate that chains to this
  // CA (mTLS); a connection without one is refused during the handshake.
  std::string client_ca_file;
};

struct WorkerOptions {
  // Sent to ferry in Ready.worker_name (logs, status). Empty: the host name.
  std::string name;
  // Credit per stream: the most events ferry may have outstanding on one
  // stream (Ready.max_in_flight). 1 .. 2^31-1.
  int max_in_flight = 64;
  // Threads running handlers (shared by all streams).
  int handler_threads = 4;
  // Run handlers on the stream thread, which read their message, instead of
  // handing the message to the handler_threads pool. Only for handlers that
  // never block (no I/O, no waiting on locks or other threads): there is one
  // stream thread, and a handler blocking it holds up reads and writes of
  // every stream. What it saves is a thread
  // hand-off and a wake-up per message. A message's events then run one
  // after another on that thread and their results go out together, in one
  // Results after the last of them; an async handler's continuations still
  // run on the pool.
  bool inline_handlers = false;
  // The most results put into one Results message.
  int max_results_batch = 256;
  // The most events of one ordering lane ferry may send as a run (see
  // "Runs" in processor.proto; sent in Ready.max_run). 0 or 1: no runs, the
  // behaviour of workers written before runs. 0 .. 2^31-1.
  int max_run = 64;
  // Serve TLS (or mTLS) instead of plaintext.
  WorkerTls tls;
};

class Worker {
 public:
  static absl::StatusOr<std::unique_ptr<Worker>> Create(WorkerOptions options, Handler handler);
  static absl::StatusOr<std::unique_ptr<Worker>> Create(WorkerOptions options,
                                                        AsyncHandler handler);

  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;
  // Calls Shutdown(absl::ZeroDuration()) if it was not called.
  ~Worker();

  // Binds `listen_address` (e.g. "0.0.0.0:50051", "127.0.0.1:0",
  // "unix:/tmp/w.sock") and starts serving: plaintext, or TLS per
  // WorkerOptions::tls (an unreadable or empty PEM file is an error naming
  // the option and the path). Call once.
  absl::Status Start(const std::string& listen_address);
  // The bound TCP port (useful with port 0); 0 before Start or for unix:.
  int port() const;

  // Graceful stop; idempotent and thread-safe (a concurrent second call waits
  // for the first to finish). New streams are refused (UNAVAILABLE), no more
  // credit is granted and events arriving from now on are not started (ferry
  // redelivers them elsewhere). Handlers already received run to completion
  // for up to `grace` and their results are sent; then every stream is
  // finished with UNAVAILABLE, the server stops and the pool threads are
  // joined (a handler still running past grace delays only that join; its
  // result is dropped).
  void Shutdown(absl::Duration grace);
  // Blocks until Shutdown() has completed.
  void Wait();
  // True once Shutdown() has been called. Long handlers may poll it to cut work short.
  bool shutting_down() const;

  // True if ferry cancelled the event with this delivery id (Event.id) while
  // it is being processed: its result will not be sent, so the handler may
  // give up early. Capture the Worker pointer in the handler to ask.
  bool IsCancelled(uint64_t id) const;

  // Counters (over all streams since Create), mostly for tests and stats.
  int64_t events_received() const;
  // Highest number of events held at once on any single stream (received and
  // not yet answered with result + credit).
  int64_t max_held() const;
  // Events received beyond the credit granted (a ferry protocol violation).
  int64_t credit_violations() const;
  // Events messages read and Results messages written: with events_received()
  // they say how many events ferry put in each message and how many results
  // the worker put in each (bench/bench_worker reports both).
  int64_t events_messages() const;
  int64_t results_messages() const;
  // Streams being served now (opened and not yet done).
  int open_streams() const;

  struct Core;  // Internal shared state (outlives the Worker while streams drain).

 private:
  class Service;

  explicit Worker(std::shared_ptr<Core> core);

  std::shared_ptr<Core> core_;
  std::unique_ptr<Service> service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
};

}  // namespace ferry::sdk

#endif  // FERRY_CLIENTS_CPP_WORKER_H_
