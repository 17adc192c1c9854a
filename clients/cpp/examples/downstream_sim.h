// A simulated downstream for example_worker (--pool_size, --unavailable_ms)
// and the handler-latency histogram its --stats file reports. These let the
// end-to-end tests of issue 21 (tests/e2e/downstream_test.cc) show what
// ferry's rate limit, adaptive concurrency and circuit breaker do to a
// downstream, with real processes.
//
// Threading: every class here is safe to call from any number of handler
// threads at once.
#ifndef FERRY_CLIENTS_CPP_EXAMPLES_DOWNSTREAM_SIM_H_
#define FERRY_CLIENTS_CPP_EXAMPLES_DOWNSTREAM_SIM_H_

#include <array>
#include <atomic>
#include <cstdint>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace ferry::examples {

// A database with a fixed connection pool: each call holds one of `size`
// slots for its work, and a call that finds none free waits for one. Its
// latency therefore grows with the calls made at once beyond `size`.
class SimulatedPool {
 public:
  explicit SimulatedPool(int size) : free_(size) {}

  // Waits for a free slot, holds it for `work`, gives it back.
  void Call(absl::Duration work);

 private:
  bool SlotFree() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return free_ > 0; }

  absl::Mutex mu_;
  int free_ ABSL_GUARDED_BY(mu_);
};

// A downstream that is down for `down_for` from the first call it sees, then
// recovers. ZeroDuration: never down.
class Outage {
 public:
  explicit Outage(absl::Duration down_for) : down_for_(down_for) {}

  // True when a call at `now` falls in the outage; the first call starts it.
  bool Down(absl::Time now);

 private:
  const absl::Duration down_for_;
  std::atomic<int64_t> first_call_ns_{0};  // 0: no call yet
};

// Latencies in log-spaced buckets (each 2% wider than the last), from 1 us
// to over 10^9 us, so a quantile is within 2% of the true one whatever the
// event count, in fixed memory.
class LatencyHistogram {
 public:
  void Record(absl::Duration latency);
  int64_t count() const { return count_.load(std::memory_order_relaxed); }
  // The q-quantile (0 < q <= 1) in microseconds: the upper edge of the
  // bucket that holds it. 0 when nothing was recorded.
  int64_t QuantileMicros(double q) const;

 private:
  static constexpr int kBuckets = 1100;  // 1.02^1100 us is far beyond any test
  std::array<std::atomic<int64_t>, kBuckets> buckets_{};
  std::atomic<int64_t> count_{0};
};

}  // namespace ferry::examples

#endif  // FERRY_CLIENTS_CPP_EXAMPLES_DOWNSTREAM_SIM_H_
