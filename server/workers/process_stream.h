// ProcessStream: one Processor.Process stream from ferry to a worker, on a
// CompletionLoop's queue (server/workers/completion_loop.h).
//
// Requests go out as bytes (grpc::ByteBuffer): the engine hands over Events
// already serialized (core/engine/worker_stream.h), so the stream only puts the
// ProcessRequest framing in front. Responses come in as bytes too and are
// parsed here: gRPC's own parse failure would only end the read (the call
// left open, the events on it stranded), while here it is a protocol error
// that resets the stream. Any end of reading (the worker finished or
// half-closed, a transport error, a parse failure) cancels the call, so the
// stream ends like any lost stream instead of staying half-dead; its events
// go back to the engine (Engine::OnStreamClosed) when the call has finished.
//
// Threading: SendEvents/SendCancel from the engine's sender; Begin, Close and
// RequestReset from the pool's threads; everything else on the loop's
// thread. The stream calls Listener::OnStreamDone once, last, from the loop's
// thread, after every operation it started has completed; it never touches
// itself after that, so the listener may delete it (from another thread).
#ifndef FERRY_SERVER_WORKERS_PROCESS_STREAM_H_
#define FERRY_SERVER_WORKERS_PROCESS_STREAM_H_

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "core/engine/engine.h"
#include "core/engine/worker_stream.h"
#include "google/protobuf/arena.h"
#include "server/workers/completion_loop.h"
#include "server/workers/worker_pool_stats.h"

namespace ferry {

class ProcessStream final : public WorkerStream {
 public:
  class Listener {
   public:
    // The stream has ended: `was_ready` if the worker got as far as Ready.
    virtual void OnStreamDone(ProcessStream* stream, bool was_ready, StreamEnd end) = 0;
    // Rate limit of log lines a worker causes per message.
    virtual bool AllowMessageLog(int64_t* suppressed) = 0;

   protected:
    ~Listener() = default;
  };
  struct Options {
    int processor = 0;
    std::string name;  // "processor#n", for logs
    // Coalescing bounds of queued Events messages (ProcessorConfig).
    int max_batch = 1;
    int64_t max_batch_bytes = 0;
  };
  using Stub = grpc::TemplatedGenericStub<grpc::ByteBuffer, grpc::ByteBuffer>;

  // Registers the stream with the engine; nothing is sent until Begin().
  ProcessStream(Engine* engine, Listener* listener, Options options, Stub* stub,
                CompletionLoop* loop);
  ~ProcessStream() override;

  // Starts the call.
  void Begin();
  // Cancels the call; the stream then ends as usual.
  void Close() { context_.TryCancel(); }
  // Set (lock-free) by the engine on a protocol error; the pool closes the
  // stream and opens a new one.
  void RequestReset() { reset_requested_ = true; }
  bool reset_requested() const { return reset_requested_; }

  // WorkerStream (from the engine's sender: never block, never call the
  // engine).
  void SendEvents(EventsWire events) override;
  void SendCancel(std::vector<uint64_t> ids) override;
  std::string Describe() const override;

 private:
  // One queued request: an Events message's bytes (the engine's EventsWire,
  // to be framed as ProcessRequest.events) or a whole serialized
  // ProcessRequest (a Cancel).
  struct Pending {
    bool events = false;
    bool alone = false;  // EventsWire::alone: never coalesced
    int count = 0;
    std::string bytes;
  };
  // Calls a member function of the stream when an operation completes.
  template <void (ProcessStream::*kOnComplete)(bool)>
  class Tag final : public CompletionTag {
   public:
    explicit Tag(ProcessStream* stream) : stream_(stream) {}
    void OnComplete(bool ok) override { (stream_->*kOnComplete)(ok); }

   private:
    ProcessStream* const stream_;
  };

  void OnReadDone(bool ok);
  void OnWriteDone(bool ok);
  void OnFinished(bool ok);

  void Enqueue(Pending request);
  // Hands the next queued request to gRPC if none is being written.
  void WriteNextLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Handles one parsed response; false for a protocol error.
  bool HandleResponse(size_t size);
  // Reading has ended: cancels the call and asks for its status.
  void EndReading();
  // Asks for the call's status, once.
  void StartFinishLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // One operation completed; the last one ends the stream.
  void OperationDone();
  void End();

  Engine* const engine_;
  Listener* const listener_;
  const Options options_;
  std::atomic<bool> reset_requested_{false};
  int64_t stream_id_ = 0;
  // Before call_: the call's memory lives in the context's call arena.
  grpc::ClientContext context_;
  std::unique_ptr<grpc::GenericClientAsyncReaderWriter> call_;
  Tag<&ProcessStream::OnReadDone> read_tag_{this};
  Tag<&ProcessStream::OnWriteDone> write_tag_{this};
  Tag<&ProcessStream::OnFinished> finished_tag_{this};
  // Read and parsed on the loop's thread only.
  grpc::ByteBuffer read_buffer_;
  // Responses are parsed on an arena reset before each one: a Results
  // message's Result objects are bump-allocated and dropped together instead
  // of allocated and freed one by one. Its first block is kept across resets.
  std::unique_ptr<char[]> parse_block_;
  google::protobuf::Arena parse_arena_;
  grpc::Status status_;  // set by Finish
  mutable absl::Mutex mu_;
  // Bounded: the engine never sends more events than the worker's credit.
  std::deque<Pending> pending_ ABSL_GUARDED_BY(mu_);
  // A write (or the call's start, which shares its operation) is in flight.
  bool writing_ ABSL_GUARDED_BY(mu_) = true;
  grpc::ByteBuffer writing_buffer_ ABSL_GUARDED_BY(mu_);  // what is being written
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  bool ready_ ABSL_GUARDED_BY(mu_) = false;
  bool finish_started_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  int operations_ ABSL_GUARDED_BY(mu_) = 0;  // started, not yet completed
  std::string worker_name_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ferry

#endif  // FERRY_SERVER_WORKERS_PROCESS_STREAM_H_
