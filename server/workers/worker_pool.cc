#include "server/workers/worker_pool.h"

#include <algorithm>
#include <atomic>
#include <deque>
#include <memory>
#include <string>
#include <utility>

#include <grpcpp/generic/generic_stub.h>

#include "absl/random/random.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "core/common/backoff.h"
#include "core/common/log.h"
#include "core/engine/events_wire.h"
#include "core/engine/worker_stream.h"
#include "core/common/worker_text.h"
#include "ferry/v1/processor.grpc.pb.h"
#include "google/protobuf/arena.h"
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
// Call metadata telling workers they may carry credit in Results
// (proto/ferry/v1/processor.proto); the C++ SDK looks for it.
constexpr char kResultsCreditHeader[] = "ferry-results-credit";
constexpr char kProcessMethod[] = "/ferry.v1.Processor/Process";

absl::Duration BackoffFor(int failures) {
  // Jitter so reconnecting streams spread out (core/common/backoff.h).
  thread_local absl::BitGen random;
  return JitteredBackoff({kInitialBackoff, kMaxBackoff}, failures, random);
}

// The first block of a stream's parse arena: a Results message of a few
// hundred results fits; a bigger one takes more blocks until the next reset.
constexpr size_t kParseBlockBytes = 16 * 1024;

google::protobuf::ArenaOptions ParseArenaOptions(char* block) {
  google::protobuf::ArenaOptions options;
  options.initial_block = block;
  options.initial_block_size = kParseBlockBytes;
  return options;
}

}  // namespace

// One Process stream. Lifetime: created by OpenLocked, deleted in OnDone.
// A hold keeps the RPC alive until reading has ended, so no write is ever
// started on a finished call.
//
// Requests go out as bytes (grpc::ByteBuffer): the engine hands over Events
// already serialized (core/engine/worker_stream.h), so the stream only puts the
// ProcessRequest framing in front. Responses come in as bytes too and are
// parsed here: gRPC's own parse failure would only end the read (the call
// left open, the events on it stranded), while here it is a protocol error
// that resets the stream.
class WorkerPool::StreamReactor final
    : public grpc::ClientBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>,
      public WorkerStream {
 public:
  StreamReactor(WorkerPool* pool, Slot* slot, ProcessStub* stub, std::string name)
      : pool_(pool), slot_(slot), name_(std::move(name)) {
    stream_id_ = pool_->engine_->AddStream(slot->processor, this);
    // Tells the worker it may fold its Credit into Results (processor.proto).
    context_.AddMetadata(kResultsCreditHeader, "1");
    stub->PrepareBidiStreamingCall(&context_, kProcessMethod, grpc::StubOptions(), this);
    AddHold();
    StartRead(&read_buffer_);
  }

  // Starts the RPC. Called without the pool's lock: gRPC may run callbacks
  // inline, and OnDone takes that lock.
  void Begin() { StartCall(); }

  // WorkerStream (from the engine's sender, after its mutex is released:
  // never block, never call the engine).
  void SendEvents(EventsWire events) override {
    Pending pending;
    pending.events = true;
    pending.count = events.count;
    pending.alone = events.alone;
    pending.bytes = std::move(events.bytes);
    Enqueue(std::move(pending));
  }
  void SendCancel(std::vector<uint64_t> ids) override {
    v1::ProcessRequest request;
    for (uint64_t id : ids) request.mutable_cancel()->add_ids(id);
    Pending pending;
    pending.bytes = request.SerializeAsString();
    Enqueue(std::move(pending));
  }
  std::string Describe() const override {
    absl::MutexLock lock(&mu_);
    return worker_name_.empty() ? name_ : absl::StrCat(name_, " (", worker_name_, ")");
  }

  void Close() { context_.TryCancel(); }

  // Set (lock-free) by the engine on a protocol error; the pool's loop
  // closes the stream and opens a new one.
  void RequestReset() { reset_requested_ = true; }
  bool reset_requested() const { return reset_requested_; }

  // gRPC callbacks.
  void OnReadDone(bool ok) override {
    if (!ok) {
      // Reading ended: the worker finished or closed its side, or the
      // transport failed. Cancel the call so OnDone runs now and the events
      // in flight on it are redelivered, rather than waiting for a status
      // that may never come while ferry still counts on the stream.
      context_.TryCancel();
      EndReading();
      return;
    }
    const size_t size = read_buffer_.Length();
    // The previous response is done with: its memory is reused.
    parse_arena_.Reset();
    auto* response = google::protobuf::Arena::CreateMessage<v1::ProcessResponse>(&parse_arena_);
    if (!grpc::SerializationTraits<v1::ProcessResponse>::Deserialize(&read_buffer_, response)
             .ok()) {
      pool_->engine_->OnProtocolError(
          stream_id_, absl::StrCat("a message of ", size, " bytes that is not a ProcessResponse"));
      RequestReset();
      context_.TryCancel();
      EndReading();
      return;
    }
    switch (response->kind_case()) {
      case v1::ProcessResponse::kReady:
        if (response->ready().max_in_flight() == 0) {
          LogWarn("workers", name_, ": worker sent Ready with max_in_flight=0; it gets no events"
                  " until it grants Credit");
        }
        {
          absl::MutexLock lock(&mu_);
          if (!ready_) worker_name_ = SanitizeWorkerName(response->ready().worker_name());
          ready_ = true;
        }
        pool_->engine_->OnReady(stream_id_, response->ready().max_in_flight(),
                                response->ready().worker_name(), response->ready().max_run());
        break;
      case v1::ProcessResponse::kCredit:
        pool_->engine_->OnCredit(stream_id_, response->credit().n());
        break;
      case v1::ProcessResponse::kResults:
        pool_->engine_->OnResults(stream_id_, response->results());
        break;
      default: {
        // Perhaps a kind from a newer protocol: ignored, but a worker can
        // send these in a loop, so the line is rate-limited.
        int64_t suppressed = 0;
        if (pool_->AllowMessageLog(&suppressed)) {
          LogWarn("workers", name_, ": ignoring an empty ProcessResponse",
                  suppressed > 0 ? absl::StrCat(" (", suppressed, " similar lines suppressed)")
                                 : "");
        }
        break;
      }
    }
    StartRead(&read_buffer_);
  }

  void OnWriteDone(bool ok) override {
    const grpc::ByteBuffer* next = nullptr;
    {
      absl::MutexLock lock(&mu_);
      writing_ = false;
      if (!ok) {
        closed_ = true;  // the read side ends too and releases the hold
        pending_.clear();
        return;
      }
      pending_.pop_front();
      next = NextWriteLocked();
    }
    if (next != nullptr) StartWrite(next);
  }

  void OnDone(const grpc::Status& status) override {
    // The status message comes from the worker: sanitized before any log.
    const bool clean = status.ok() || status.error_code() == grpc::StatusCode::CANCELLED;
    const std::string why =
        clean ? std::string("stream closed")
              : absl::StrCat("stream ended: ", SanitizeWorkerMessage(status.error_message()),
                             " (code ", static_cast<int>(status.error_code()), ")");
    // Give the engine back this stream's in-flight events first: after this
    // call it never touches `this` again.
    pool_->engine_->OnStreamClosed(stream_id_, why);
    bool was_ready;
    {
      absl::MutexLock lock(&mu_);
      was_ready = ready_;
    }
    StreamEnd end = StreamEnd::kError;
    if (reset_requested_) {
      end = StreamEnd::kProtocolError;
    } else if (clean) {
      end = StreamEnd::kClosed;
    }
    if (clean) {
      LogInfo("workers", name_, ": ", why);
    } else {
      LogWarn("workers", name_, ": ", why);
    }
    // The pool deletes this reactor later (never while Stop may still be
    // closing it).
    pool_->OnStreamDone(slot_, was_ready, end, this);
  }

 private:
  // One queued request: an Events message's bytes (the engine's EventsWire,
  // to be framed as ProcessRequest.events) or a whole serialized
  // ProcessRequest (a Cancel).
  struct Pending {
    bool events = false;
    bool alone = false;  // EventsWire::alone: never coalesced
    int count = 0;
    std::string bytes;
    grpc::ByteBuffer buffer;  // what is written, made when its turn comes
  };

  // StartWrite is called outside mu_ (gRPC may run OnWriteDone inline). The
  // front element stays put while writing_: deque push_back keeps references.
  void Enqueue(Pending request) {
    const grpc::ByteBuffer* next = nullptr;
    {
      absl::MutexLock lock(&mu_);
      if (closed_) return;  // OnStreamClosed re-queues these events
      // While a write is in flight, events join the last queued (not yet
      // written) Events message up to the processor's max_batch: no write
      // is delayed, and small dispatches coalesce instead of each paying for
      // its own message. Two Events messages' bytes back to back are one
      // Events message.
      if (writing_ && pending_.size() >= 2 && request.events && pending_.back().events &&
          !request.alone && !pending_.back().alone) {
        const ProcessorConfig& processor = pool_->config_.processors[slot_->processor];
        Pending& queued = pending_.back();
        if (queued.count + request.count <= processor.max_batch &&
            static_cast<int64_t>(queued.bytes.size() + request.bytes.size()) <=
                processor.max_batch_bytes) {
          queued.bytes.append(request.bytes);
          queued.count += request.count;
          return;
        }
      }
      pending_.push_back(std::move(request));
      next = NextWriteLocked();
    }
    if (next != nullptr) StartWrite(next);
  }
  const grpc::ByteBuffer* NextWriteLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (writing_ || pending_.empty() || closed_) return nullptr;
    writing_ = true;
    Pending& front = pending_.front();
    front.buffer = Frame(front);
    return &front.buffer;
  }
  // The bytes to write: a Cancel as is; Events behind the ProcessRequest
  // field header (field 1, length-delimited). The body is handed to gRPC
  // without a copy.
  static grpc::ByteBuffer Frame(Pending& pending) {
    auto* body = new std::string(std::move(pending.bytes));
    grpc::Slice slices[2];
    size_t count = 0;
    if (pending.events) {
      uint8_t header[kEventFraming];  // ProcessRequest.events: field 1, length-delimited
      const uint8_t* end = WriteField1Header(body->size(), header);
      slices[count++] = grpc::Slice(header, static_cast<size_t>(end - header));
    }
    slices[count++] = grpc::Slice(
        body->data(), body->size(), [](void* owned) { delete static_cast<std::string*>(owned); },
        body);
    return grpc::ByteBuffer(slices, count);
  }
  void EndReading() {
    {
      absl::MutexLock lock(&mu_);
      closed_ = true;
    }
    RemoveHold();
  }

  WorkerPool* const pool_;
  Slot* const slot_;
  std::atomic<bool> reset_requested_{false};
  const std::string name_;
  int64_t stream_id_ = 0;
  grpc::ClientContext context_;
  grpc::ByteBuffer read_buffer_;
  // Responses are parsed on an arena reset before each one: a Results
  // message's Result objects are bump-allocated and dropped together instead
  // of allocated and freed one by one. Its first block is kept across resets.
  std::unique_ptr<char[]> parse_block_ = std::make_unique<char[]>(kParseBlockBytes);
  google::protobuf::Arena parse_arena_{ParseArenaOptions(parse_block_.get())};
  mutable absl::Mutex mu_;
  // Bounded: the engine never sends more events than the worker's credit.
  std::deque<Pending> pending_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  bool ready_ ABSL_GUARDED_BY(mu_) = false;
  std::string worker_name_ ABSL_GUARDED_BY(mu_);
};

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
      [](WorkerStream* stream) { static_cast<StreamReactor*>(stream)->RequestReset(); });
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

WorkerPool::StreamReactor* WorkerPool::OpenLocked(Slot& slot) {
  const ProcessorConfig& processor = config_.processors[slot.processor];
  ++open_streams_;
  slot.reset_sent = false;
  if (stats_ != nullptr) stats_->Opened(slot.processor);
  slot.reactor = new StreamReactor(this, &slot, stubs_[slot.processor].get(),
                                   absl::StrCat(processor.name, "#", slot.index));
  return slot.reactor;
}

void WorkerPool::OnStreamDone(Slot* slot, bool was_ready, StreamEnd end,
                              StreamReactor* reactor) {
  absl::MutexLock lock(&mu_);
  --open_streams_;
  slot->reactor = nullptr;
  finished_.push_back(reactor);
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
  for (StreamReactor* reactor : finished_) delete reactor;
  finished_.clear();
}

void WorkerPool::ReconnectLoop() {
  absl::MutexLock lock(&mu_);
  while (!stopping_) {
    // Periodic timer: wakes at once when Stop() sets stopping_.
    mu_.AwaitWithTimeout(absl::Condition(&stopping_), absl::Milliseconds(50));
    if (stopping_) break;
    DeleteFinishedLocked();
    // Reactors are deleted only by this thread, so the ones collected here
    // stay valid while they are closed outside the lock.
    std::vector<StreamReactor*> to_reset;
    for (auto& slot : slots_) {
      if (slot->reactor != nullptr && slot->reactor->reset_requested() &&
          !slot->reset_sent) {
        slot->reset_sent = true;
        to_reset.push_back(slot->reactor);
      }
    }
    if (!to_reset.empty()) {
      mu_.Unlock();
      for (StreamReactor* reactor : to_reset) reactor->Close();
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
    std::vector<StreamReactor*> opened;
    for (auto& slot : slots_) {
      if (slot->reactor == nullptr && slot->reopen_at <= now &&
          now - channel_ready_since_[slot->processor] >= kChannelSettleTime) {
        opened.push_back(OpenLocked(*slot));
      }
    }
    if (opened.empty()) continue;
    mu_.Unlock();
    for (StreamReactor* reactor : opened) reactor->Begin();
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
  // Only this thread deletes reactors now, so the live ones stay valid while
  // they are closed outside the lock.
  std::vector<StreamReactor*> live;
  {
    absl::MutexLock lock(&mu_);
    for (auto& slot : slots_) {
      if (slot->reactor != nullptr) live.push_back(slot->reactor);
    }
  }
  for (StreamReactor* reactor : live) reactor->Close();
  absl::MutexLock lock(&mu_);
  // Probes call back into the pool; each ends within kProbeTimeout.
  mu_.Await(absl::Condition(
      +[](WorkerPool* pool) ABSL_EXCLUSIVE_LOCKS_REQUIRED(pool->mu_) {
        return pool->open_streams_ == 0 && pool->probes_in_flight_ == 0;
      },
      this));
  DeleteFinishedLocked();
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
