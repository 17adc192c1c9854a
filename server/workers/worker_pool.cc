#include "server/workers/worker_pool.h"

#include <algorithm>
#include <memory>
#include <string>
#include <utility>

#include <grpcpp/generic/generic_stub.h>

#include "absl/random/random.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "core/common/backoff.h"
#include "core/common/log.h"
#include "ferry/v1/processor.grpc.pb.h"
#include "server/workers/tls_credentials.h"

namespace ferry {
namespace {

constexpr absl::Duration kInitialBackoff = absl::Milliseconds(100);
constexpr absl::Duration kMaxBackoff = absl::Seconds(5);
constexpr absl::Duration kChannelSettleTime = absl::Milliseconds(50);
// How often a channel that keeps failing to connect is logged again.
constexpr absl::Duration kFailureLogInterval = absl::Seconds(30);
// Bounds a connection probe (it normally fails at once) and so Stop().
constexpr absl::Duration kProbeTimeout = absl::Seconds(2);

absl::Duration BackoffFor(int failures) {
  // Jitter so reconnecting streams spread out (core/common/backoff.h).
  thread_local absl::BitGen random;
  return JitteredBackoff({kInitialBackoff, kMaxBackoff}, failures, random);
}

}  // namespace

absl::StatusOr<std::unique_ptr<WorkerPool>> WorkerPool::Create(const Config& config,
                                                               Engine* engine,
                                                               WorkerPoolStats* stats) {
  auto pool = std::make_unique<WorkerPool>(config, engine, stats);
  if (absl::Status built = pool->BuildCredentials(); !built.ok()) return built;
  return pool;
}

WorkerPool::WorkerPool(const Config& config, Engine* engine, WorkerPoolStats* stats)
    : config_(config), engine_(engine), stats_(stats) {}

WorkerPool::~WorkerPool() { Stop(); }

absl::Status WorkerPool::BuildCredentials() {
  credentials_.clear();
  for (size_t p = 0; p < config_.processors.size(); ++p) {
    absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> built =
        ChannelCredentialsFor(config_.processors[p].tls, absl::StrCat("processors[", p, "].tls"));
    if (!built.ok()) {
      credentials_.clear();
      return built.status();
    }
    credentials_.push_back(*std::move(built));
  }
  return absl::OkStatus();
}

void WorkerPool::Start() {
  if (credentials_.size() != config_.processors.size()) {  // constructed, not Create()d
    if (absl::Status built = BuildCredentials(); !built.ok()) {
      LogError("workers", built.message(), "; no processor is dialed");
      return;
    }
  }
  started_ = true;
  // Called with the engine's mutex held: only sets a flag.
  engine_->SetStreamResetter(
      [](WorkerStream* stream) { static_cast<ProcessStream*>(stream)->RequestReset(); });
  // One loop per four cores: a loop's thread polls its streams' sockets and
  // runs their completions, results included.
  const int loops = std::clamp(static_cast<int>(std::thread::hardware_concurrency()) / 4, 1, 8);
  for (int i = 0; i < loops; ++i) {
    loops_.push_back(std::make_unique<CompletionLoop>(absl::StrCat("ferry-streams-", i)));
    loops_.back()->Start();
  }
  for (size_t p = 0; p < config_.processors.size(); ++p) {
    const ProcessorConfig& processor = config_.processors[p];
    grpc::ChannelArguments arguments;
    arguments.SetLoadBalancingPolicyName("round_robin");
    arguments.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
    arguments.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 5000);
    // Keepalive bounds how long a vanished worker host (no RST) holds its
    // streams' events before they are redelivered (core/config/keepalive.h). Pings
    // go on while a stream is idle (no limit of pings without data), so the
    // bound holds however long the worker has been holding its events.
    arguments.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS,
                     static_cast<int>(absl::ToInt64Milliseconds(processor.keepalive.interval)));
    arguments.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS,
                     static_cast<int>(absl::ToInt64Milliseconds(processor.keepalive.timeout)));
    arguments.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
    arguments.SetInt(GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH, 64 << 20);
    AddTlsChannelArguments(processor.tls, &arguments);
    auto channel = grpc::CreateCustomChannel(processor.target, credentials_[p], arguments);
    stubs_.push_back(std::make_unique<ProcessStub>(channel));
    channels_.push_back(std::move(channel));
    LogInfo("workers", "processor ", processor.name, ": dialing ", processor.target, " with ",
            processor.streams, " streams (", DescribeChannelTls(processor.tls), ")");
    if (processor.timeout <= processor.keepalive.Bound()) {
      LogWarn("workers", "processor ", processor.name, ": timeout ",
              absl::FormatDuration(processor.timeout), " is not above the keepalive bound ",
              absl::FormatDuration(processor.keepalive.Bound()),
              " (keepalive.interval + keepalive.timeout): events held by a worker host that"
              " vanishes time out (and take the failure policy) before ferry notices the lost"
              " stream and redelivers them");
    }
  }
  absl::MutexLock lock(&mu_);
  for (size_t p = 0; p < config_.processors.size(); ++p) {
    channels_[p]->GetState(/*try_to_connect=*/true);
    for (int i = 0; i < config_.processors[p].streams; ++i) {
      auto slot = std::make_unique<Slot>();
      slot->processor = static_cast<int>(p);
      slot->index = i;
      slots_.push_back(std::move(slot));
    }
  }
  channel_ready_since_.assign(config_.processors.size(), absl::InfiniteFuture());
  failing_since_.assign(config_.processors.size(), absl::InfiniteFuture());
  next_failure_log_.assign(config_.processors.size(), absl::InfinitePast());
  // Streams are opened by the reconnect loop once their channel is READY.
  reconnect_thread_ = std::thread([this] { ReconnectLoop(); });
}

ProcessStream* WorkerPool::OpenLocked(Slot& slot) {
  const ProcessorConfig& processor = config_.processors[slot.processor];
  ++open_streams_;
  slot.reset_sent = false;
  if (stats_ != nullptr) stats_->Opened(slot.processor);
  ProcessStream::Options options;
  options.processor = slot.processor;
  options.name = absl::StrCat(processor.name, "#", slot.index);
  options.max_batch = processor.max_batch;
  options.max_batch_bytes = processor.max_batch_bytes;
  CompletionLoop* loop = loops_[next_loop_++ % loops_.size()].get();
  slot.stream = new ProcessStream(engine_, this, std::move(options),
                                  stubs_[slot.processor].get(), loop);
  return slot.stream;
}

void WorkerPool::OnStreamDone(ProcessStream* stream, bool was_ready, StreamEnd end) {
  absl::MutexLock lock(&mu_);
  --open_streams_;
  Slot* slot = nullptr;
  for (auto& candidate : slots_) {
    if (candidate->stream == stream) slot = candidate.get();
  }
  finished_.push_back(stream);
  if (slot == nullptr) return;  // cannot happen: a slot owns its stream until here
  slot->stream = nullptr;
  if (stopping_) return;
  if (stats_ != nullptr) stats_->Reset(slot->processor, end);
  // A stream that got as far as Ready was healthy: start the backoff over.
  // Not after a protocol error: a worker that breaks the protocol on every
  // stream is reopened ever more slowly (its log lines and resets with it).
  slot->failures =
      was_ready && end != StreamEnd::kProtocolError ? 1 : slot->failures + 1;
  slot->reopen_at = absl::Now() + BackoffFor(slot->failures);
}

void WorkerPool::DeleteFinishedLocked() {
  for (ProcessStream* stream : finished_) delete stream;
  finished_.clear();
}

void WorkerPool::ReconnectLoop() {
  absl::MutexLock lock(&mu_);
  while (!stopping_) {
    // Periodic timer: wakes at once when Stop() sets stopping_.
    mu_.AwaitWithTimeout(absl::Condition(&stopping_), absl::Milliseconds(50));
    if (stopping_) break;
    DeleteFinishedLocked();
    // Streams are deleted only by this thread, so the ones collected here
    // stay valid while they are closed outside the lock.
    std::vector<ProcessStream*> to_reset;
    for (auto& slot : slots_) {
      if (slot->stream != nullptr && slot->stream->reset_requested() &&
          !slot->reset_sent) {
        slot->reset_sent = true;
        to_reset.push_back(slot->stream);
      }
    }
    if (!to_reset.empty()) {
      mu_.Unlock();
      for (ProcessStream* stream : to_reset) stream->Close();
      mu_.Lock();
    }
    const absl::Time now = absl::Now();
    // A stream is opened only on a channel that has been READY for a tick:
    // round_robin picks among connected addresses only, so opening every
    // stream the moment the first address connects would put them all on
    // that one worker. While a channel is not READY gRPC reconnects it with
    // its own backoff.
    std::vector<int> to_probe;
    for (size_t p = 0; p < channels_.size(); ++p) {
      const grpc_connectivity_state state = channels_[p]->GetState(/*try_to_connect=*/true);
      if (state == GRPC_CHANNEL_READY) {
        if (channel_ready_since_[p] == absl::InfiniteFuture()) channel_ready_since_[p] = now;
        if (failing_since_[p] != absl::InfiniteFuture()) {
          LogInfo("workers", "processor ", config_.processors[p].name, ": connected to ",
                  config_.processors[p].target, " after failing for ",
                  absl::FormatDuration(absl::Trunc(now - failing_since_[p], absl::Seconds(1))));
          failing_since_[p] = absl::InfiniteFuture();
          next_failure_log_[p] = absl::InfinitePast();
        }
      } else {
        channel_ready_since_[p] = absl::InfiniteFuture();
      }
      // round_robin stays in TRANSIENT_FAILURE while it retries, so this is
      // one failure episode however many attempts it makes.
      if (state == GRPC_CHANNEL_TRANSIENT_FAILURE) {
        if (failing_since_[p] == absl::InfiniteFuture()) failing_since_[p] = now;
        if (now >= next_failure_log_[p]) {
          next_failure_log_[p] = now + kFailureLogInterval;
          ++probes_in_flight_;
          to_probe.push_back(static_cast<int>(p));
        }
      }
    }
    if (!to_probe.empty()) {
      mu_.Unlock();
      for (int p : to_probe) StartConnectProbe(p);
      mu_.Lock();
    }
    std::vector<ProcessStream*> opened;
    for (auto& slot : slots_) {
      if (slot->stream == nullptr && slot->reopen_at <= now &&
          now - channel_ready_since_[slot->processor] >= kChannelSettleTime) {
        opened.push_back(OpenLocked(*slot));
      }
    }
    if (opened.empty()) continue;
    mu_.Unlock();
    for (ProcessStream* stream : opened) stream->Begin();
    mu_.Lock();
  }
}

void WorkerPool::Stop() {
  if (stopped_ || !started_) return;
  stopped_ = true;
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (reconnect_thread_.joinable()) reconnect_thread_.join();
  // Only this thread deletes streams now, so the live ones stay valid while
  // they are closed outside the lock.
  std::vector<ProcessStream*> live;
  {
    absl::MutexLock lock(&mu_);
    for (auto& slot : slots_) {
      if (slot->stream != nullptr) live.push_back(slot->stream);
    }
  }
  for (ProcessStream* stream : live) stream->Close();
  // Probes call back into the pool; each ends within kProbeTimeout.
  {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(
        +[](WorkerPool* pool) ABSL_EXCLUSIVE_LOCKS_REQUIRED(pool->mu_) {
          return pool->open_streams_ == 0 && pool->probes_in_flight_ == 0;
        },
        this));
    DeleteFinishedLocked();
  }
  // Every stream has finished, so no operation is left on the loops.
  for (auto it = loops_.rbegin(); it != loops_.rend(); ++it) (*it)->Stop();
}

// A fail-fast call on a channel in TRANSIENT_FAILURE fails at once, with
// gRPC's last connection error as its message: the only place the C++ API
// tells why (a refused port, a certificate that does not verify, ...).
struct WorkerPool::ConnectProbe {
  explicit ConnectProbe(std::shared_ptr<grpc::Channel> channel) : stub(std::move(channel)) {}
  grpc::GenericStub stub;
  grpc::ClientContext context;
  grpc::ByteBuffer request;
  grpc::ByteBuffer response;
};

void WorkerPool::StartConnectProbe(int p) {
  auto* probe = new ConnectProbe(channels_[p]);
  probe->context.set_deadline(absl::ToChronoTime(absl::Now() + kProbeTimeout));
  grpc::Slice empty(std::string{});
  probe->request = grpc::ByteBuffer(&empty, 1);
  // Not a Processor method: should the channel connect meanwhile, the worker
  // answers UNIMPLEMENTED and nothing else happens.
  probe->stub.UnaryCall(
      &probe->context, "/ferry.v1.Processor/ConnectionProbe", grpc::StubOptions(),
      &probe->request, &probe->response, [this, p, probe](grpc::Status status) {
        if (!status.ok() && status.error_code() != grpc::StatusCode::UNIMPLEMENTED) {
          const ProcessorConfig& processor = config_.processors[p];
          absl::Duration failing;
          {
            absl::MutexLock lock(&mu_);
            failing = absl::Now() - failing_since_[p];
          }
          LogWarn("workers", "processor ", processor.name, ": cannot connect to ",
                  processor.target, " (", DescribeChannelTls(processor.tls),
                  failing >= absl::Seconds(1)
                      ? absl::StrCat(", failing for ",
                                     absl::FormatDuration(absl::Trunc(failing, absl::Seconds(1))))
                      : std::string(),
                  "): ", status.error_message(), "; retrying");
        }
        delete probe;  // gRPC allows freeing the context in the callback
        absl::MutexLock lock(&mu_);
        --probes_in_flight_;
      });
}

bool WorkerPool::AllowMessageLog(int64_t* suppressed) {
  absl::MutexLock lock(&mu_);
  return message_log_limiter_.Allow(absl::Now(), suppressed);
}

int WorkerPool::OpenStreams() const {
  absl::MutexLock lock(&mu_);
  return open_streams_;
}

}  // namespace ferry
