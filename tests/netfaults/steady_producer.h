// SteadyProducer: a background thread producing rounds of keyed records to a
// topic through `kafka_tool produce` until stopped, for tests that need a
// stream flowing while they break the network. Each round has its own key
// prefix (r<round>-), so every key's sequence numbers start at 0 and
// delivery_audit.h's per-key order check holds across rounds.
//
// Threading: construct, Stop() and error() from the test thread.
#ifndef FERRY_TESTS_NETFAULTS_STEADY_PRODUCER_H_
#define FERRY_TESTS_NETFAULTS_STEADY_PRODUCER_H_

#include <cstdint>
#include <string>
#include <thread>

#include "absl/synchronization/notification.h"
#include "absl/time/time.h"

namespace ferry::testing {

class SteadyProducer {
 public:
  // `per_round` records over 20 keys into `partitions` partitions, a round
  // every `interval` (plus the produce call's own time).
  SteadyProducer(std::string bootstrap, std::string topic, int partitions, int per_round,
                 absl::Duration interval = absl::Milliseconds(250));
  ~SteadyProducer() { Stop(); }
  SteadyProducer(const SteadyProducer&) = delete;
  SteadyProducer& operator=(const SteadyProducer&) = delete;

  // Joins the thread; the number of records produced (acknowledged).
  int64_t Stop();
  // Why producing stopped early; empty if it did not. Read after Stop().
  const std::string& error() const { return error_; }

 private:
  void Run();

  const std::string bootstrap_;
  const std::string topic_;
  const int partitions_;
  const int per_round_;
  const absl::Duration interval_;
  absl::Notification stop_;
  // Written by the thread, read after Stop() joined it.
  int64_t produced_ = 0;
  std::string error_;
  std::thread thread_;
};

}  // namespace ferry::testing

#endif  // FERRY_TESTS_NETFAULTS_STEADY_PRODUCER_H_
