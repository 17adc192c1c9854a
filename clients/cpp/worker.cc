// ferry C++ worker SDK: the Processor stream reactor, the handler pool and the
// Worker lifecycle. See worker.h for the contract.
//
// Lifetimes:
//   * Worker::Core (shared_ptr) holds the handler, the pool, counters and the
//     set of live streams. Streams keep it alive, so a late `done` call after
//     the Worker was destroyed is harmless.
//   * A Stream (the gRPC reactor) is reference counted: one reference for
//     gRPC (dropped in OnDone) and one per handler task it scheduled (dropped
//     when that handler completes). It deletes itself at zero, so pool tasks
//     never touch a freed reactor.
// Locking: Stream::mu_ may be held while taking Core::mu, never the reverse.
// gRPC operations (StartRead/StartWrite/Finish) are started under Stream::mu_;
// gRPC never runs user reactions inline in those calls.
#include "clients/cpp/worker.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <deque>
#include <exception>
#include <limits>
#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_format.h"
#include "core/common/pem_file.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "ferry/v1/processor.grpc.pb.h"

namespace ferry::sdk {
namespace {

using ferry::v1::ProcessRequest;
using ferry::v1::ProcessResponse;

template <typename... Args>
void Log(const absl::FormatSpec<Args...>& format, const Args&... args) {
  std::string line = absl::StrFormat(format, args...);
  std::fprintf(stderr, "ferry-sdk: %s\n", line.c_str());
}

// Fixed-size pool; Stop() runs what is queued, then joins.
class ThreadPool {
 public:
  explicit ThreadPool(int threads) {
    threads_.reserve(threads);
    for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { Loop(); });
  }
  ~ThreadPool() { Stop(); }

  // False once stopped (the task is not run).
  bool Schedule(std::function<void()> task) {
    absl::MutexLock l(&mu_);
    if (stop_) return false;
    queue_.push_back(std::move(task));
    return true;
  }

  void Stop() {
    std::vector<std::thread> threads;
    {
      absl::MutexLock l(&mu_);
      stop_ = true;
      threads.swap(threads_);
    }
    for (std::thread& t : threads) t.join();
  }

 private:
  void Loop() {
    for (;;) {
      std::function<void()> task;
      {
        absl::MutexLock l(&mu_);
        mu_.Await(absl::Condition(
            +[](ThreadPool* p) ABSL_EXCLUSIVE_LOCKS_REQUIRED(p->mu_) {
              return p->stop_ || !p->queue_.empty();
            },
            this));
        if (queue_.empty()) return;
        task = std::move(queue_.front());
        queue_.pop_front();
      }
      task();
    }
  }

  absl::Mutex mu_;
  std::deque<std::function<void()>> queue_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_ ABSL_GUARDED_BY(mu_);
};

class Stream;

}  // namespace

struct Worker::Core {
  Core(WorkerOptions opts, Handler h, AsyncHandler ah)
      : options(std::move(opts)),
        handler(std::move(h)),
        async_handler(std::move(ah)),
        pool(options.handler_threads) {}

  void UpdateMaxHeld(int64_t held) {
    int64_t cur = max_held.load(std::memory_order_relaxed);
    while (held > cur && !max_held.compare_exchange_weak(cur, held, std::memory_order_relaxed)) {
    }
  }

  const WorkerOptions options;
  const Handler handler;            // exactly one of handler / async_handler is set
  const AsyncHandler async_handler;
  ThreadPool pool;

  std::atomic<int64_t> events_received{0};
  std::atomic<int64_t> max_held{0};
  std::atomic<int64_t> credit_violations{0};
  std::atomic<bool> shutting_down{false};

  absl::Mutex mu;
  bool draining ABSL_GUARDED_BY(mu) = false;
  int64_t running ABSL_GUARDED_BY(mu) = 0;  // handler tasks scheduled, not completed
  absl::flat_hash_set<Stream*> streams ABSL_GUARDED_BY(mu);
  absl::flat_hash_map<uint64_t, int> cancelled ABSL_GUARDED_BY(mu);  // id -> streams

  absl::Mutex shutdown_mu;
  bool shutdown_started ABSL_GUARDED_BY(shutdown_mu) = false;
  absl::Notification shutdown_done;
};

namespace {

using Core = Worker::Core;

ferry::v1::Result ToResult(uint64_t id, const Outcome& outcome) {
  ferry::v1::Result r;
  r.set_id(id);
  switch (outcome.kind()) {
    case Outcome::Kind::kOk:
      r.set_status(ferry::v1::Result::OK);
      break;
    case Outcome::Kind::kRetry: {
      r.set_status(ferry::v1::Result::RETRY);
      absl::Duration after = outcome.retry_after();
      if (after > absl::ZeroDuration()) {
        int64_t ms = absl::ToInt64Milliseconds(absl::Ceil(after, absl::Milliseconds(1)));
        r.set_retry_after_ms(static_cast<uint32_t>(
            std::min<int64_t>(ms, std::numeric_limits<uint32_t>::max())));
      }
      break;
    }
    case Outcome::Kind::kFail:
      r.set_status(ferry::v1::Result::FAIL);
      break;
  }
  if (!outcome.message().empty()) r.set_message(outcome.message());
  return r;
}

// One Process stream. See the file comment for its lifetime.
class Stream final : public grpc::ServerBidiReactor<ProcessRequest, ProcessResponse> {
 public:
  Stream(std::shared_ptr<Core> core, bool results_carry_credit)
      : core_(std::move(core)), results_carry_credit_(results_carry_credit) {
    bool reject;
    {
      absl::MutexLock cl(&core_->mu);
      reject = core_->draining;
      if (!reject) core_->streams.insert(this);
    }
    absl::MutexLock l(&mu_);
    if (reject) {
      finished_ = true;
      Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE, "worker shutting down"));
      return;
    }
    ProcessResponse ready;
    ready.mutable_ready()->set_max_in_flight(static_cast<uint32_t>(core_->options.max_in_flight));
    ready.mutable_ready()->set_worker_name(core_->options.name);
    queue_.push_back(std::move(ready));
    granted_ = core_->options.max_in_flight;
    StartRead(&req_);
    PumpLocked();
  }

  void Ref() { refs_.fetch_add(1, std::memory_order_relaxed); }
  void Unref() {
    if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
  }

  void OnReadDone(bool ok) override {
    std::vector<std::shared_ptr<ferry::v1::Event>> to_run;
    {
      absl::MutexLock l(&mu_);
      if (!ok) {
        // ferry closed its side (WritesDone) or the call broke: finish; the
        // handlers still running complete and their results are dropped.
        EndLocked(grpc::Status::OK);
        return;
      }
      switch (req_.kind_case()) {
        case ProcessRequest::kEvents:
          TakeEventsLocked(&to_run);
          break;
        case ProcessRequest::kCancel:
          CancelLocked();
          break;
        default:
          Log("ignoring a ProcessRequest of unknown kind %d", static_cast<int>(req_.kind_case()));
          break;
      }
      req_.Clear();
      if (!finished_ && !ending_) StartRead(&req_);
    }
    if (to_run.empty()) return;
    // One pool task per handler thread (at most one per event), each taking
    // the message's next event until none is left: one pool lock and wake-up
    // per thread, not per event, and a slow event holds up only its thread.
    struct RunState {
      std::vector<std::shared_ptr<ferry::v1::Event>> events;
      std::atomic<size_t> next{0};
    };
    auto run = std::make_shared<RunState>();
    run->events = std::move(to_run);
    const size_t tasks =
        std::min(run->events.size(), static_cast<size_t>(core_->options.handler_threads));
    for (size_t t = 0; t < tasks; ++t) {
      bool scheduled = core_->pool.Schedule([this, run] {
        for (size_t i = run->next.fetch_add(1); i < run->events.size();
             i = run->next.fetch_add(1)) {
          Run(run->events[i]);
        }
      });
      if (!scheduled) {
        // The pool stopped: whatever no task takes fails here.
        for (size_t i = run->next.fetch_add(1); i < run->events.size();
             i = run->next.fetch_add(1)) {
          Complete(run->events[i]->id(), Outcome::Fail("worker stopped"));
        }
      }
    }
  }

  void OnWriteDone(bool ok) override {
    absl::MutexLock l(&mu_);
    write_in_flight_ = false;
    if (!ok) EndLocked(grpc::Status(grpc::StatusCode::UNAVAILABLE, "write failed"));
    PumpLocked();
  }

  void OnCancel() override {
    absl::MutexLock l(&mu_);
    EndLocked(grpc::Status::CANCELLED);
  }

  void OnDone() override {
    // gRPC runs OnDone after every other reaction (OnCancel included) has
    // returned, but it orders them inside libgrpc++, where ThreadSanitizer
    // cannot see it. Taking mu_ once makes that order visible: every reaction
    // touches the stream under mu_, so its release happens before this.
    { absl::MutexLock l(&mu_); }
    {
      absl::MutexLock cl(&core_->mu);
      core_->streams.erase(this);
    }
    Unref();
  }

  // Shutdown: finish once every queued message (results) has been written.
  void RequestFinish(grpc::Status status) {
    absl::MutexLock l(&mu_);
    if (finish_requested_) return;
    finish_requested_ = true;
    finish_status_ = std::move(status);
    PumpLocked();
  }

 private:
  struct InFlight {
    int count = 0;
    bool cancelled = false;
  };
  struct Completed {
    uint64_t id;
    Outcome outcome;
    bool cancelled;
  };

  // Completes an async handler's event exactly once; reports FAIL if the
  // handler drops `done` without calling it.
  class AsyncDone {
   public:
    AsyncDone(Stream* stream, std::shared_ptr<ferry::v1::Event> event)
        : stream_(stream), event_(std::move(event)) {}
    ~AsyncDone() {
      if (!called_.load(std::memory_order_acquire)) {
        stream_->Complete(event_->id(),
                          Outcome::Fail("async handler dropped its done callback without calling it"));
      }
    }
    void Call(Outcome outcome) {
      if (called_.exchange(true, std::memory_order_acq_rel)) {
        Log("done called more than once for event %d; ignored", event_->id());
        return;
      }
      stream_->Complete(event_->id(), outcome);
    }

   private:
    Stream* const stream_;
    const std::shared_ptr<ferry::v1::Event> event_;  // valid until done
    std::atomic<bool> called_{false};
  };

  ~Stream() override = default;

  void EndLocked(grpc::Status status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (!ending_) {
      ending_ = true;
      end_status_ = std::move(status);
    }
    PumpLocked();
  }

  void TakeEventsLocked(std::vector<std::shared_ptr<ferry::v1::Event>>* to_run)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const int64_t n = req_.events().events_size();
    if (n == 0) return;
    core_->events_received.fetch_add(n, std::memory_order_relaxed);
    if (finished_ || ending_) return;
    {
      absl::MutexLock cl(&core_->mu);
      if (core_->draining) {
        // Not started: ferry redelivers them when this stream closes.
        return;
      }
      core_->running += n;
    }
    received_ += n;
    if (received_ > granted_) {
      const int64_t over = std::min(n, received_ - granted_);
      core_->credit_violations.fetch_add(over, std::memory_order_relaxed);
      Log("protocol violation: ferry sent %d event(s) beyond the %d credit granted; processing them",
          over, granted_);
    }
    held_ += n;
    core_->UpdateMaxHeld(held_);
    // The message's events stay in one shared Events (swapped out of req_,
    // no copy); each task holds an aliasing pointer to its event, so there is
    // one allocation per message, not per event.
    auto batch = std::make_shared<ferry::v1::Events>();
    batch->Swap(req_.mutable_events());
    to_run->reserve(n);
    for (int i = 0; i < n; ++i) {
      std::shared_ptr<ferry::v1::Event> ev(batch, batch->mutable_events(i));
      ++inflight_[ev->id()].count;
      to_run->push_back(std::move(ev));
      Ref();
    }
  }

  void CancelLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    std::vector<uint64_t> marked;
    for (uint64_t id : req_.cancel().ids()) {
      auto it = inflight_.find(id);
      if (it == inflight_.end() || it->second.cancelled) continue;  // done or unknown
      it->second.cancelled = true;
      marked.push_back(id);
    }
    if (marked.empty()) return;
    absl::MutexLock cl(&core_->mu);
    for (uint64_t id : marked) ++core_->cancelled[id];
  }

  // Runs on a pool thread.
  void Run(const std::shared_ptr<ferry::v1::Event>& ev) {
    bool skip;
    {
      absl::MutexLock l(&mu_);
      auto it = inflight_.find(ev->id());
      skip = finished_ || ending_ || (it != inflight_.end() && it->second.cancelled);
    }
    if (skip) {  // cancelled before it started, or nobody listens: no result is sent
      Complete(ev->id(), Outcome::Ok());
      return;
    }
    if (core_->handler) {
      Outcome outcome = Outcome::Ok();
      try {
        outcome = core_->handler(*ev);
      } catch (const std::exception& e) {
        outcome = Outcome::Fail(e.what());
      } catch (...) {
        outcome = Outcome::Fail("handler threw a non-std::exception");
      }
      Complete(ev->id(), outcome);
      return;
    }
    auto done = std::make_shared<AsyncDone>(this, ev);
    try {
      core_->async_handler(*ev, [done](Outcome outcome) { done->Call(std::move(outcome)); });
    } catch (const std::exception& e) {
      done->Call(Outcome::Fail(e.what()));
    } catch (...) {
      done->Call(Outcome::Fail("handler threw a non-std::exception"));
    }
  }

  // A handler finished (any thread). Drops the task's reference.
  void Complete(uint64_t id, const Outcome& outcome) {
    {
      absl::MutexLock l(&mu_);
      bool uncancel = false;
      bool cancelled = false;
      auto it = inflight_.find(id);
      if (it != inflight_.end()) {
        cancelled = it->second.cancelled;
        if (--it->second.count == 0) {
          inflight_.erase(it);
          uncancel = cancelled;
        }
      }
      {
        // Under mu_: Shutdown sees running == 0 only with this result queued
        // (its RequestFinish needs mu_), and IsCancelled() forgets the id
        // before the credit is sent.
        absl::MutexLock cl(&core_->mu);
        --core_->running;
        if (uncancel) {
          auto c = core_->cancelled.find(id);
          if (c != core_->cancelled.end() && --c->second == 0) core_->cancelled.erase(c);
        }
      }
      if (!finished_ && !ending_) {
        completed_.push_back(Completed{id, outcome, cancelled});
        PumpLocked();
      } else {
        --held_;
      }
    }
    Unref();
  }

  // Starts the next write, or Finish, when nothing is being written.
  void PumpLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (finished_ || write_in_flight_) return;
    if (ending_) {
      queue_.clear();
      held_ -= static_cast<int64_t>(completed_.size());
      completed_.clear();
      finished_ = true;
      Finish(end_status_);
      return;
    }
    if (queue_.empty() && !completed_.empty()) BatchLocked();
    if (!queue_.empty()) {
      write_buf_ = std::move(queue_.front());
      queue_.pop_front();
      write_in_flight_ = true;
      StartWrite(&write_buf_);
      return;
    }
    if (finish_requested_) {
      finished_ = true;
      Finish(finish_status_);
    }
  }

  // Everything completed since the last write (up to max_results_batch):
  // one Results message (cancelled events excluded) and Credit{n}, inside
  // the Results when ferry said it takes that, else as a message after it.
  void BatchLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const size_t n =
        std::min(completed_.size(), static_cast<size_t>(core_->options.max_results_batch));
    ProcessResponse results;
    auto* list = results.mutable_results()->mutable_results();
    for (size_t i = 0; i < n; ++i) {
      const Completed& c = completed_[i];
      if (!c.cancelled) *list->Add() = ToResult(c.id, c.outcome);
    }
    completed_.erase(completed_.begin(), completed_.begin() + static_cast<std::ptrdiff_t>(n));
    held_ -= static_cast<int64_t>(n);
    // Draining (shutting down): no new work, so no credit.
    const bool grant = !core_->shutting_down.load(std::memory_order_acquire);
    if (grant) granted_ += static_cast<int64_t>(n);
    if (grant && results_carry_credit_) {
      results.mutable_results()->set_credit(static_cast<uint32_t>(n));
      queue_.push_back(std::move(results));
      return;
    }
    if (!list->empty()) queue_.push_back(std::move(results));
    if (grant) {
      ProcessResponse credit;
      credit.mutable_credit()->set_n(static_cast<uint32_t>(n));
      queue_.push_back(std::move(credit));
    }
  }

  const std::shared_ptr<Core> core_;
  const bool results_carry_credit_;  // ferry sent `ferry-results-credit: 1`
  std::atomic<int> refs_{1};  // gRPC's, until OnDone

  ProcessRequest req_;  // the one outstanding read

  absl::Mutex mu_;
  ProcessResponse write_buf_ ABSL_GUARDED_BY(mu_);  // the one outstanding write
  std::deque<ProcessResponse> queue_ ABSL_GUARDED_BY(mu_);
  std::deque<Completed> completed_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<uint64_t, InFlight> inflight_ ABSL_GUARDED_BY(mu_);
  bool write_in_flight_ ABSL_GUARDED_BY(mu_) = false;
  bool ending_ ABSL_GUARDED_BY(mu_) = false;  // peer gone / broken: drop results, finish
  grpc::Status end_status_ ABSL_GUARDED_BY(mu_);
  bool finish_requested_ ABSL_GUARDED_BY(mu_) = false;  // shutdown: flush, then finish
  grpc::Status finish_status_ ABSL_GUARDED_BY(mu_);
  bool finished_ ABSL_GUARDED_BY(mu_) = false;  // Finish() called
  int64_t granted_ ABSL_GUARDED_BY(mu_) = 0;    // credit granted (Ready + Credits)
  int64_t received_ ABSL_GUARDED_BY(mu_) = 0;   // events accepted for processing
  int64_t held_ ABSL_GUARDED_BY(mu_) = 0;       // received, credit not yet returned
};

std::string DefaultName() {
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) != 0 || host[0] == '\0') return "ferry-cpp-worker";
  return host;
}

absl::Status Validate(const WorkerOptions& o) {
  if (o.max_in_flight < 1) return absl::InvalidArgumentError("max_in_flight must be >= 1");
  if (o.handler_threads < 1) return absl::InvalidArgumentError("handler_threads must be >= 1");
  if (o.max_results_batch < 1) {
    return absl::InvalidArgumentError("max_results_batch must be >= 1");
  }
  if (o.tls.cert_file.empty() != o.tls.key_file.empty()) {
    return absl::InvalidArgumentError("tls.cert_file and tls.key_file go together; set both");
  }
  if (!o.tls.client_ca_file.empty() && o.tls.cert_file.empty()) {
    return absl::InvalidArgumentError(
        "tls.client_ca_file needs tls.cert_file and tls.key_file (mTLS is TLS first)");
  }
  return absl::OkStatus();
}

// A PEM file's contents. Checked only for being readable and looking like
// PEM: gRPC parses it in BuildAndStart, and refuses a bad one with nothing
// but a log line, so the obvious mistakes get a clear error here.
absl::StatusOr<std::string> ReadPem(const std::string& option, const std::string& path) {
  absl::StatusOr<std::string> contents = ReadPemFile(option, path);
  if (contents.ok() && !HasPemBlock(*contents)) {
    return absl::InvalidArgumentError(absl::StrFormat("%s: %s is not PEM", option, path));
  }
  return contents;
}

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> ServerCredentials(const WorkerTls& tls) {
  if (tls.cert_file.empty()) return grpc::InsecureServerCredentials();
  absl::StatusOr<std::string> cert = ReadPem("tls.cert_file", tls.cert_file);
  if (!cert.ok()) return cert.status();
  absl::StatusOr<std::string> key = ReadPem("tls.key_file", tls.key_file);
  if (!key.ok()) return key.status();
  grpc::SslServerCredentialsOptions options(GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  options.pem_key_cert_pairs.push_back({*key, *cert});
  if (!tls.client_ca_file.empty()) {
    absl::StatusOr<std::string> ca = ReadPem("tls.client_ca_file", tls.client_ca_file);
    if (!ca.ok()) return ca.status();
    options.pem_root_certs = *ca;
    options.client_certificate_request = GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY;
  }
  return grpc::SslServerCredentials(options);
}

}  // namespace

class Worker::Service final : public ferry::v1::Processor::CallbackService {
 public:
  explicit Service(std::shared_ptr<Core> core) : core_(std::move(core)) {}

  grpc::ServerBidiReactor<ProcessRequest, ProcessResponse>* Process(
      grpc::CallbackServerContext* context) override {
    // A ferry that sends this header takes credit inside Results (one
    // message per batch instead of Results + Credit); an older one does not.
    const auto& metadata = context->client_metadata();
    auto header = metadata.find("ferry-results-credit");
    const bool results_carry_credit = header != metadata.end() && header->second == "1";
    return new Stream(core_, results_carry_credit);
  }

 private:
  const std::shared_ptr<Core> core_;
};

absl::StatusOr<std::unique_ptr<Worker>> Worker::Create(WorkerOptions options, Handler handler) {
  if (absl::Status s = Validate(options); !s.ok()) return s;
  if (!handler) return absl::InvalidArgumentError("handler is empty");
  if (options.name.empty()) options.name = DefaultName();
  return std::unique_ptr<Worker>(
      new Worker(std::make_shared<Core>(std::move(options), std::move(handler), nullptr)));
}

absl::StatusOr<std::unique_ptr<Worker>> Worker::Create(WorkerOptions options,
                                                       AsyncHandler handler) {
  if (absl::Status s = Validate(options); !s.ok()) return s;
  if (!handler) return absl::InvalidArgumentError("handler is empty");
  if (options.name.empty()) options.name = DefaultName();
  return std::unique_ptr<Worker>(
      new Worker(std::make_shared<Core>(std::move(options), nullptr, std::move(handler))));
}

Worker::Worker(std::shared_ptr<Core> core)
    : core_(std::move(core)), service_(std::make_unique<Service>(core_)) {}

Worker::~Worker() { Shutdown(absl::ZeroDuration()); }

absl::Status Worker::Start(const std::string& listen_address) {
  {
    absl::MutexLock l(&core_->shutdown_mu);
    if (core_->shutdown_started) return absl::FailedPreconditionError("worker is shut down");
    if (server_) return absl::FailedPreconditionError("worker already started");
    absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> credentials =
        ServerCredentials(core_->options.tls);
    if (!credentials.ok()) return credentials.status();
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort(listen_address, *credentials, &port);
    builder.RegisterService(service_.get());
    builder.SetMaxReceiveMessageSize(-1);  // ferry bounds its batches by its own byte budget
    builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);  // a taken port is an error
    // ferry pings every processors[].keepalive.interval (at least 1 s) to
    // notice a vanished worker; gRPC's default (5 min between pings on an idle
    // stream) would answer that with GOAWAY too_many_pings. Half of ferry's
    // 1 s floor: the server times the gap between arrivals, which can be a
    // little under the interval, and three early pings on an idle stream end it.
    builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
    builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 500);
    std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
    if (!server) {
      return absl::UnavailableError(absl::StrFormat(
          "cannot listen on %s%s", listen_address,
          core_->options.tls.cert_file.empty()
              ? ""
              : " (or gRPC refused the TLS certificate or key: see its log above)"));
    }
    server_ = std::move(server);
    port_ = port;
  }
  return absl::OkStatus();
}

int Worker::port() const { return port_; }

void Worker::Shutdown(absl::Duration grace) {
  bool first;
  {
    absl::MutexLock l(&core_->shutdown_mu);
    first = !core_->shutdown_started;
    core_->shutdown_started = true;
  }
  if (!first) {
    core_->shutdown_done.WaitForNotification();
    return;
  }
  const absl::Time deadline = absl::Now() + grace;
  core_->shutting_down.store(true, std::memory_order_release);

  // Refuse new streams and new events; wait for the handlers already running.
  std::vector<Stream*> streams;
  {
    absl::MutexLock l(&core_->mu);
    core_->draining = true;
    core_->mu.AwaitWithDeadline(
        absl::Condition(
            +[](Core* c) ABSL_EXCLUSIVE_LOCKS_REQUIRED(c->mu) { return c->running == 0; },
            core_.get()),
        deadline);
    if (core_->running > 0) {
      Log("shutdown: grace expired with %d handler(s) still running; their results are dropped",
          core_->running);
    }
    for (Stream* s : core_->streams) {
      s->Ref();  // still registered, so gRPC's reference is held: safe
      streams.push_back(s);
    }
  }
  // Send what is queued, then end each stream so ferry redelivers the rest elsewhere.
  for (Stream* s : streams) {
    s->RequestFinish(grpc::Status(grpc::StatusCode::UNAVAILABLE, "worker shutting down"));
    s->Unref();
  }
  if (server_) {
    // Flushing the last results gets a short budget beyond the grace.
    const absl::Time flush = std::max(deadline, absl::Now() + absl::Milliseconds(250));
    server_->Shutdown(absl::ToChronoTime(flush));
    server_->Wait();
  }
  core_->pool.Stop();
  core_->shutdown_done.Notify();
}

void Worker::Wait() { core_->shutdown_done.WaitForNotification(); }

bool Worker::shutting_down() const { return core_->shutting_down.load(std::memory_order_acquire); }

bool Worker::IsCancelled(uint64_t id) const {
  absl::MutexLock l(&core_->mu);
  return core_->cancelled.contains(id);
}

int64_t Worker::events_received() const {
  return core_->events_received.load(std::memory_order_relaxed);
}
int64_t Worker::max_held() const { return core_->max_held.load(std::memory_order_relaxed); }
int64_t Worker::credit_violations() const {
  return core_->credit_violations.load(std::memory_order_relaxed);
}

}  // namespace ferry::sdk
