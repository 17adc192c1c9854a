// ShutdownSignals: how ferry hears that it should stop. SIGTERM (Kubernetes,
// `docker stop`), SIGINT (Ctrl-C) and SIGHUP (the controlling terminal went
// away) all mean the same: drain, commit, leave the group, exit 0. ferry has
// no configuration reload, so SIGHUP is not the usual "reload" either; dying
// of it (the default action) would skip the drain and the commit.
//
// The first signal starts the shutdown (WaitForFirst returns). While the
// drain runs, a second signal ends the wait for in-flight events
// (stop_waiting() turns true) and a third exits at once without cleanup.
//
// Threading: construct in main() before any other thread exists, so every
// thread inherits the blocked mask and only sigwait here receives the
// signals. WaitForFirst, WatchForMore and the destructor from the owner
// thread; stop_waiting() from any thread.
#ifndef FERRY_SERVER_SHUTDOWN_SIGNALS_H_
#define FERRY_SERVER_SHUTDOWN_SIGNALS_H_

#include <signal.h>

#include <atomic>
#include <string>
#include <thread>

namespace ferry {

class ShutdownSignals {
 public:
  // Blocks SIGTERM, SIGINT, SIGHUP (and SIGUSR2, which ends the watcher) in
  // the calling thread.
  ShutdownSignals();
  ~ShutdownSignals();
  ShutdownSignals(const ShutdownSignals&) = delete;
  ShutdownSignals& operator=(const ShutdownSignals&) = delete;

  // Blocks until the first shutdown signal; returns its number.
  int WaitForFirst();
  // Starts a thread for the second signal (stop_waiting) and the third
  // (_Exit(1)). The destructor ends it.
  void WatchForMore();
  bool stop_waiting() const { return stop_waiting_.load(); }

  // "SIGTERM", "SIGHUP", ...
  static std::string Name(int signal_number);

 private:
  int Wait();
  sigset_t signals_;
  std::atomic<bool> stop_waiting_{false};
  std::thread watcher_;
};

}  // namespace ferry

#endif  // FERRY_SERVER_SHUTDOWN_SIGNALS_H_
