// The worker SDK's shared state (Worker::Core, declared in worker.h): the
// handler, the handler pool, counters and the set of live streams. Streams
// keep it alive (shared_ptr), so a late `done` call after the Worker was
// destroyed is harmless. Internal to //clients/cpp:worker.
//
// Threading: the atomics from any thread; the rest under Core::mu (streams,
// draining, accepting, running, cancelled) or Core::shutdown_mu. Lock order:
// Stream::mu_ may be held while taking Core::mu, never the reverse.
#ifndef FERRY_CLIENTS_CPP_WORKER_CORE_H_
#define FERRY_CLIENTS_CPP_WORKER_CORE_H_

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "clients/cpp/thread_pool.h"
#include "clients/cpp/worker.h"

namespace ferry::sdk {
namespace internal {

class Stream;

// The SDK's log line on stderr: `ferry-sdk: <message>`.
template <typename... Args>
void Log(const absl::FormatSpec<Args...>& format, const Args&... args) {
  std::string line = absl::StrFormat(format, args...);
  std::fprintf(stderr, "ferry-sdk: %s\n", line.c_str());
}

}  // namespace internal

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
  internal::ThreadPool pool;

  std::atomic<int64_t> events_received{0};
  std::atomic<int64_t> max_held{0};
  std::atomic<int64_t> credit_violations{0};
  std::atomic<int64_t> events_messages{0};   // Events messages read
  std::atomic<int64_t> results_messages{0};  // Results messages written
  std::atomic<bool> shutting_down{false};

  absl::Mutex mu;
  bool draining ABSL_GUARDED_BY(mu) = false;
  // Streams may request calls on the completion queue (Stream::Accept):
  // set by Worker::Service::Start, cleared before the queue shuts down.
  bool accepting ABSL_GUARDED_BY(mu) = false;
  int64_t running ABSL_GUARDED_BY(mu) = 0;  // handler tasks scheduled, not completed
  absl::flat_hash_set<internal::Stream*> streams ABSL_GUARDED_BY(mu);
  absl::flat_hash_map<uint64_t, int> cancelled ABSL_GUARDED_BY(mu);  // id -> streams

  absl::Mutex shutdown_mu;
  bool shutdown_started ABSL_GUARDED_BY(shutdown_mu) = false;
  absl::Notification shutdown_done;
};

}  // namespace ferry::sdk

#endif  // FERRY_CLIENTS_CPP_WORKER_CORE_H_
