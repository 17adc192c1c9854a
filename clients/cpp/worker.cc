// ferry C++ worker SDK: the Worker lifecycle (Create, Start, Shutdown, the
// counters) and its Service (the completion queue and the stream thread). The
// stream is in stream.{h,cc}, the handler pool in
// thread_pool.{h,cc}, the shared state in worker_core.h and the server
// credentials in server_credentials.{h,cc}. See worker.h for the contract.
#include "clients/cpp/worker.h"

#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "clients/cpp/server_credentials.h"
#include "clients/cpp/stream.h"
#include "clients/cpp/worker_core.h"
#include "ferry/v1/processor.grpc.pb.h"

namespace ferry::sdk {
namespace {

using internal::Log;
using internal::Stream;
using Core = Worker::Core;

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
  if (o.max_run < 0) return absl::InvalidArgumentError("max_run must be >= 0 (0 or 1: no runs)");
  if (o.tls.cert_file.empty() != o.tls.key_file.empty()) {
    return absl::InvalidArgumentError("tls.cert_file and tls.key_file go together; set both");
  }
  if (!o.tls.client_ca_file.empty() && o.tls.cert_file.empty()) {
    return absl::InvalidArgumentError(
        "tls.client_ca_file needs tls.cert_file and tls.key_file (mTLS is TLS first)");
  }
  return absl::OkStatus();
}

}  // namespace

// The Processor service on one completion queue and the one thread (the
// stream thread) that drains it: every stream's operation completions run
// there, and gRPC polls the worker's sockets on it.
// Register before the server is built, Start after, Stop after the server's
// Shutdown and Wait (idempotent; the destructor calls it).
class Worker::Service {
 public:
  explicit Service(std::shared_ptr<Core> core) : core_(std::move(core)) {}
  ~Service() { Stop(); }
  Service(const Service&) = delete;
  Service& operator=(const Service&) = delete;

  // A fresh service and queue each time: gRPC binds an async service to
  // the one server it was registered with, even one that failed to start
  // (a taken port), and a later Start builds another.
  void Register(grpc::ServerBuilder* builder) {
    Stop();  // a failed Start's queue
    service_ = std::make_unique<ferry::v1::Processor::AsyncService>();
    builder->RegisterService(service_.get());
    cq_ = builder->AddCompletionQueue();
  }

  void Start() {
    {
      absl::MutexLock l(&core_->mu);
      core_->accepting = true;
    }
    Stream::Accept(core_, service_.get(), cq_.get());
    thread_ = std::thread([this] {
      pthread_setname_np(pthread_self(), "ferry-sdk-cq");
      Drain();
    });
  }

  void Stop() {
    if (cq_ == nullptr) return;
    {
      absl::MutexLock l(&core_->mu);
      core_->accepting = false;
    }
    cq_->Shutdown();
    // Next returns false only once every pending tag has come back.
    if (thread_.joinable()) {
      thread_.join();
    } else {
      Drain();
    }
    cq_.reset();
  }

 private:
  void Drain() {
    void* tag = nullptr;
    bool ok = false;
    while (cq_->Next(&tag, &ok)) static_cast<Stream::Tag*>(tag)->Proceed(ok);
  }

  const std::shared_ptr<Core> core_;
  std::unique_ptr<ferry::v1::Processor::AsyncService> service_;
  std::unique_ptr<grpc::ServerCompletionQueue> cq_;
  std::thread thread_;
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
        internal::ServerCredentials(core_->options.tls);
    if (!credentials.ok()) return credentials.status();
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort(listen_address, *credentials, &port);
    service_->Register(&builder);
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
    service_->Start();
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
      s->Ref();  // still registered, so the call's reference is held: safe
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
  service_->Stop();
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

int64_t Worker::events_messages() const {
  return core_->events_messages.load(std::memory_order_relaxed);
}

int64_t Worker::results_messages() const {
  return core_->results_messages.load(std::memory_order_relaxed);
}
int Worker::open_streams() const {
  absl::MutexLock l(&core_->mu);
  return static_cast<int>(core_->streams.size());
}

}  // namespace ferry::sdk
