#include "server/shutdown_signals.h"

#include <pthread.h>

#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "core/common/log.h"

namespace ferry {

ShutdownSignals::ShutdownSignals() {
  sigemptyset(&signals_);
  sigaddset(&signals_, SIGTERM);
  sigaddset(&signals_, SIGINT);
  sigaddset(&signals_, SIGHUP);
  sigaddset(&signals_, SIGUSR2);  // internal: ends the watcher
  pthread_sigmask(SIG_BLOCK, &signals_, nullptr);
}

ShutdownSignals::~ShutdownSignals() {
  if (watcher_.joinable()) {
    pthread_kill(watcher_.native_handle(), SIGUSR2);
    watcher_.join();
  }
}

int ShutdownSignals::Wait() {
  int signal_number = 0;
  sigwait(&signals_, &signal_number);
  return signal_number;
}

int ShutdownSignals::WaitForFirst() {
  int signal_number = Wait();
  while (signal_number == SIGUSR2) signal_number = Wait();
  return signal_number;
}

void ShutdownSignals::WatchForMore() {
  watcher_ = std::thread([this] {
    int more = 0;
    while (true) {
      const int again = Wait();
      if (again == SIGUSR2) return;  // shutdown finished
      if (++more >= 2) {
        LogWarn("ferry", "third signal (", Name(again), "): exiting now");
        std::_Exit(1);
      }
      LogWarn("ferry", "second signal (", Name(again),
              "): no more waiting; committing what is finished");
      stop_waiting_ = true;
    }
  });
}

std::string ShutdownSignals::Name(int signal_number) {
  switch (signal_number) {
    case SIGTERM:
      return "SIGTERM";
    case SIGINT:
      return "SIGINT";
    case SIGHUP:
      return "SIGHUP";
    default:
      return absl::StrCat("signal ", signal_number);
  }
}

}  // namespace ferry
