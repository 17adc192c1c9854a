#include "server/workers/process_stream.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "core/common/log.h"
#include "core/common/worker_text.h"
#include "core/engine/events_wire.h"
#include "ferry/v1/processor.grpc.pb.h"

namespace ferry {
namespace {

// Call metadata telling workers they may carry credit in Results
// (proto/ferry/v1/processor.proto); the C++ SDK looks for it.
constexpr char kResultsCreditHeader[] = "ferry-results-credit";
constexpr char kProcessMethod[] = "/ferry.v1.Processor/Process";

// The first block of a stream's parse arena: a Results message of a few
// hundred results fits; a bigger one takes more blocks until the next reset.
constexpr size_t kParseBlockBytes = 16 * 1024;

google::protobuf::ArenaOptions ParseArenaOptions(char* block) {
  google::protobuf::ArenaOptions options;
  options.initial_block = block;
  options.initial_block_size = kParseBlockBytes;
  return options;
}

// The bytes to write: a Cancel as is; Events behind the ProcessRequest field
// header (field 1, length-delimited). The body is handed to gRPC without a
// copy.
grpc::ByteBuffer Frame(bool events, std::string bytes) {
  auto* body = new std::string(std::move(bytes));
  grpc::Slice slices[2];
  size_t count = 0;
  if (events) {
    uint8_t header[kEventFraming];
    const uint8_t* end = WriteField1Header(body->size(), header);
    slices[count++] = grpc::Slice(header, static_cast<size_t>(end - header));
  }
  slices[count++] = grpc::Slice(
      body->data(), body->size(), [](void* owned) { delete static_cast<std::string*>(owned); },
      body);
  return grpc::ByteBuffer(slices, count);
}

}  // namespace

ProcessStream::ProcessStream(Engine* engine, Listener* listener, Options options, Stub* stub,
                             CompletionLoop* loop)
    : engine_(engine),
      listener_(listener),
      options_(std::move(options)),
      parse_block_(std::make_unique<char[]>(kParseBlockBytes)),
      parse_arena_(ParseArenaOptions(parse_block_.get())) {
  stream_id_ = engine_->AddStream(options_.processor, this);
  // Tells the worker it may fold its Credit into Results (processor.proto).
  context_.AddMetadata(kResultsCreditHeader, "1");
  call_ = stub->PrepareCall(&context_, kProcessMethod, loop->queue());
}

ProcessStream::~ProcessStream() = default;

void ProcessStream::Begin() {
  // Operations complete on the loop's thread, never inline, so they may be
  // started under mu_.
  absl::MutexLock lock(&mu_);
  operations_ += 2;
  // The start is gRPC's write operation sending the call's metadata, so it
  // completes like a write: writing_ stays set until then.
  call_->StartCall(&write_tag_);
  call_->Read(&read_buffer_, &read_tag_);
}

void ProcessStream::SendEvents(EventsWire events) {
  Pending pending;
  pending.events = true;
  pending.count = events.count;
  pending.alone = events.alone;
  pending.bytes = std::move(events.bytes);
  Enqueue(std::move(pending));
}

void ProcessStream::SendCancel(std::vector<uint64_t> ids) {
  v1::ProcessRequest request;
  for (uint64_t id : ids) request.mutable_cancel()->add_ids(id);
  Pending pending;
  pending.bytes = request.SerializeAsString();
  Enqueue(std::move(pending));
}

std::string ProcessStream::Describe() const {
  absl::MutexLock lock(&mu_);
  return worker_name_.empty() ? options_.name
                              : absl::StrCat(options_.name, " (", worker_name_, ")");
}

void ProcessStream::Enqueue(Pending request) {
  absl::MutexLock lock(&mu_);
  if (closed_) return;  // OnStreamClosed re-queues these events
  // While a write is in flight, events join the last queued (not yet
  // written) Events message up to the processor's max_batch: no write is
  // delayed, and small dispatches coalesce instead of each paying for its
  // own message. Two Events messages' bytes back to back are one Events
  // message.
  if (writing_ && !pending_.empty() && request.events && pending_.back().events &&
      !request.alone && !pending_.back().alone) {
    Pending& queued = pending_.back();
    if (queued.count + request.count <= options_.max_batch &&
        static_cast<int64_t>(queued.bytes.size() + request.bytes.size()) <=
            options_.max_batch_bytes) {
      queued.bytes.append(request.bytes);
      queued.count += request.count;
      return;
    }
  }
  pending_.push_back(std::move(request));
  WriteNextLocked();
}

void ProcessStream::WriteNextLocked() {
  if (writing_ || pending_.empty() || closed_) return;
  writing_ = true;
  ++operations_;
  Pending& front = pending_.front();
  // Kept until the write completes: the last reference to its slices is
  // then dropped here, after the completion, not on whichever gRPC thread
  // finishes with its own reference (which ThreadSanitizer cannot see
  // ordered after this thread's writes to the bytes).
  writing_buffer_ = Frame(front.events, std::move(front.bytes));
  call_->Write(writing_buffer_, &write_tag_);
  pending_.pop_front();
}

void ProcessStream::OnWriteDone(bool ok) {
  {
    absl::MutexLock lock(&mu_);
    writing_ = false;
    writing_buffer_.Clear();
    if (ok) {
      WriteNextLocked();
    } else {
      closed_ = true;  // reading fails too and ends the stream
      pending_.clear();
    }
  }
  OperationDone();
}

void ProcessStream::OnReadDone(bool ok) {
  if (!ok) {
    // Reading ended: the worker finished or closed its side, or the
    // transport failed. Cancel the call so it ends now and the events in
    // flight on it are redelivered, rather than waiting for a status that
    // may never come while ferry still counts on the stream.
    EndReading();
  } else if (!HandleResponse(read_buffer_.Length())) {
    RequestReset();
    EndReading();
  } else {
    absl::MutexLock lock(&mu_);
    // The first read brought the initial metadata, so the status can be
    // asked for now (the two may not both wait for it).
    StartFinishLocked();
    ++operations_;
    call_->Read(&read_buffer_, &read_tag_);
  }
  OperationDone();
}

bool ProcessStream::HandleResponse(size_t size) {
  // The previous response is done with: its memory is reused.
  parse_arena_.Reset();
  auto* response = google::protobuf::Arena::CreateMessage<v1::ProcessResponse>(&parse_arena_);
  if (!grpc::SerializationTraits<v1::ProcessResponse>::Deserialize(&read_buffer_, response)
           .ok()) {
    engine_->OnProtocolError(
        stream_id_, absl::StrCat("a message of ", size, " bytes that is not a ProcessResponse"));
    return false;
  }
  switch (response->kind_case()) {
    case v1::ProcessResponse::kReady:
      if (response->ready().max_in_flight() == 0) {
        LogWarn("workers", options_.name,
                ": worker sent Ready with max_in_flight=0; it gets no events until it grants"
                " Credit");
      }
      {
        absl::MutexLock lock(&mu_);
        if (!ready_) worker_name_ = SanitizeWorkerName(response->ready().worker_name());
        ready_ = true;
      }
      engine_->OnReady(stream_id_, response->ready().max_in_flight(),
                       response->ready().worker_name(), response->ready().max_run());
      break;
    case v1::ProcessResponse::kCredit:
      engine_->OnCredit(stream_id_, response->credit().n());
      break;
    case v1::ProcessResponse::kResults:
      engine_->OnResults(stream_id_, response->results());
      break;
    default: {
      // Perhaps a kind from a newer protocol: ignored, but a worker can send
      // these in a loop, so the line is rate-limited.
      int64_t suppressed = 0;
      if (listener_->AllowMessageLog(&suppressed)) {
        LogWarn("workers", options_.name, ": ignoring an empty ProcessResponse",
                suppressed > 0 ? absl::StrCat(" (", suppressed, " similar lines suppressed)")
                               : "");
      }
      break;
    }
  }
  return true;
}

void ProcessStream::EndReading() {
  {
    absl::MutexLock lock(&mu_);
    closed_ = true;
    pending_.clear();
    StartFinishLocked();
  }
  // After Finish was asked for: a status the worker already sent (say, why
  // it gave up on the stream) is kept, not replaced by CANCELLED.
  context_.TryCancel();
}

void ProcessStream::StartFinishLocked() {
  // Asked for as early as it may be, so the worker's status is received
  // with its end of the stream, as it arrives.
  if (finish_started_) return;
  finish_started_ = true;
  ++operations_;
  call_->Finish(&status_, &finished_tag_);
}

void ProcessStream::OnFinished(bool /*ok*/) {
  {
    absl::MutexLock lock(&mu_);
    finished_ = true;
  }
  OperationDone();
}

void ProcessStream::OperationDone() {
  {
    absl::MutexLock lock(&mu_);
    --operations_;
    // Once finished no operation starts (closed_), so this is the last.
    if (operations_ > 0 || !finished_) return;
  }
  End();
}

void ProcessStream::End() {
  // The status message comes from the worker: sanitized before any log.
  const bool clean = status_.ok() || status_.error_code() == grpc::StatusCode::CANCELLED;
  const std::string why =
      clean ? std::string("stream closed")
            : absl::StrCat("stream ended: ", SanitizeWorkerMessage(status_.error_message()),
                           " (code ", static_cast<int>(status_.error_code()), ")");
  // Give the engine back this stream's in-flight events first: after this
  // call it never touches `this` again.
  engine_->OnStreamClosed(stream_id_, why);
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
    LogInfo("workers", options_.name, ": ", why);
  } else {
    LogWarn("workers", options_.name, ": ", why);
  }
  // The listener may delete this stream from now on.
  listener_->OnStreamDone(this, was_ready, end);
}

}  // namespace ferry
