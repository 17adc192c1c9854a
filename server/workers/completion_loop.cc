#include "server/workers/completion_loop.h"

#include <pthread.h>

#include <utility>

namespace ferry {

CompletionLoop::CompletionLoop(std::string thread_name) : thread_name_(std::move(thread_name)) {}

CompletionLoop::~CompletionLoop() { Stop(); }

void CompletionLoop::Start() {
  thread_ = std::thread([this] { Run(); });
}

void CompletionLoop::Stop() {
  if (stopped_) return;
  stopped_ = true;
  queue_.Shutdown();
  if (thread_.joinable()) {
    thread_.join();
  } else {
    Drain();  // never started: the queue must be drained before it is destroyed
  }
}

void CompletionLoop::Run() {
  // Linux limits thread names to 15 characters.
  pthread_setname_np(pthread_self(), thread_name_.substr(0, 15).c_str());
  Drain();
}

void CompletionLoop::Drain() {
  void* tag = nullptr;
  bool ok = false;
  while (queue_.Next(&tag, &ok)) static_cast<CompletionTag*>(tag)->OnComplete(ok);
}

}  // namespace ferry
