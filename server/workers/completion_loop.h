// CompletionLoop: one gRPC completion queue and the one thread that drains it.
//
// Why not gRPC's callback API: in gRPC 1.51 it runs every callback on at
// least two shared "nexting" threads that poll one completion queue and hand
// the poller to each other on every event, a futex wake-up and a context
// switch per read or write. A queue drained by a single thread of ours polls
// and runs the completions itself, with no hand-off, as long as no other
// thread polls the same sockets: ferry runs gRPC's "poll" engine for that
// (server/main.cc; bench/RESULTS.md, stop 35). Each asynchronous operation is
// started with a CompletionTag as its tag; the loop calls the tag's
// OnComplete with the operation's `ok`.
//
// Threading: Start/Stop from the owner. OnComplete runs on the loop's thread,
// one at a time; it must not block. Stop() shuts the queue down and joins:
// call it only once every operation started on the queue has completed (its
// owner waits for its calls to finish first). Idempotent.
#ifndef FERRY_SERVER_WORKERS_COMPLETION_LOOP_H_
#define FERRY_SERVER_WORKERS_COMPLETION_LOOP_H_

#include <grpcpp/completion_queue.h>

#include <string>
#include <thread>

namespace ferry {

class CompletionTag {
 public:
  virtual void OnComplete(bool ok) = 0;

 protected:
  ~CompletionTag() = default;
};

class CompletionLoop {
 public:
  explicit CompletionLoop(std::string thread_name);
  ~CompletionLoop();
  CompletionLoop(const CompletionLoop&) = delete;
  CompletionLoop& operator=(const CompletionLoop&) = delete;

  void Start();
  void Stop();

  // Where this loop's operations are started.
  grpc::CompletionQueue* queue() { return &queue_; }

 private:
  void Run();
  void Drain();

  const std::string thread_name_;
  grpc::CompletionQueue queue_;
  std::thread thread_;
  bool stopped_ = false;
};

}  // namespace ferry

#endif  // FERRY_SERVER_WORKERS_COMPLETION_LOOP_H_
