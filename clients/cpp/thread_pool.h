// The worker SDK's handler pool: a fixed number of threads running queued
// tasks. Stop() runs what is already queued, then joins; Schedule after Stop
// returns false and does not run the task.
//
// Threading: Schedule and Stop may be called from any thread (Stop not from a
// pool thread: it joins them).
#ifndef FERRY_CLIENTS_CPP_THREAD_POOL_H_
#define FERRY_CLIENTS_CPP_THREAD_POOL_H_

#include <deque>
#include <functional>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace ferry::sdk::internal {

class ThreadPool {
 public:
  explicit ThreadPool(int threads);
  ~ThreadPool() { Stop(); }

  // False once stopped (the task is not run).
  bool Schedule(std::function<void()> task);

  void Stop();

  // True on a thread of any ThreadPool (tests tell where a handler ran).
  static bool OnPoolThread();

 private:
  void Loop();

  absl::Mutex mu_;
  std::deque<std::function<void()>> queue_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ferry::sdk::internal

#endif  // FERRY_CLIENTS_CPP_THREAD_POOL_H_
