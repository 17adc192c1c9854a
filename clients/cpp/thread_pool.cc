#include "clients/cpp/thread_pool.h"

#include <functional>
#include <thread>
#include <utility>
#include <vector>

namespace ferry::sdk::internal {

namespace {
thread_local bool on_pool_thread = false;
}  // namespace

bool ThreadPool::OnPoolThread() { return on_pool_thread; }

ThreadPool::ThreadPool(int threads) {
  absl::MutexLock l(&mu_);
  threads_.reserve(threads);
  for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { Loop(); });
}

bool ThreadPool::Schedule(std::function<void()> task) {
  absl::MutexLock l(&mu_);
  if (stop_) return false;
  queue_.push_back(std::move(task));
  return true;
}

void ThreadPool::Stop() {
  std::vector<std::thread> threads;
  {
    absl::MutexLock l(&mu_);
    stop_ = true;
    threads.swap(threads_);
  }
  for (std::thread& t : threads) t.join();
}

void ThreadPool::Loop() {
  on_pool_thread = true;
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

}  // namespace ferry::sdk::internal
