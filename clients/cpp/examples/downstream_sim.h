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

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <random>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace ferry::examples {

// A database with a fixed connection pool: each call holds one of `size`
// slots for its work, and a call that finds none free waits for one, first
// come first served (as connection pools hand out connections). Its latency
// therefore grows with the calls made at once beyond `size`.
//
// `jitter` (0 to 1) spreads each call's work uniformly over work x (1 +-
// jitter), as queries vary. Without it, calls that start together end
// together, and the pool works in lockstep rounds: a call that just missed
// a slot waits a whole round, however short the queue.
class SimulatedPool {
 public:
  SimulatedPool(int size, double jitter, uint64_t seed)
      : jitter_(jitter > 0 ? std::min(jitter, 1.0) : 0.0),  // NaN: none
        random_(seed),
        admitted_(size) {}

  // Waits for a free slot, holds it for `work` (jittered), gives it back.
  // Returns how long the slot was held (the call's latency when the pool is
  // idle).
  absl::Duration Call(absl::Duration work);
  // Calls waiting for a slot now, and calls made so far (for tests).
  int64_t Waiting() ABSL_LOCKS_EXCLUDED(mu_);
  int64_t Arrived() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Ticket {
    const SimulatedPool* pool;
    int64_t number;
  };
  // absl::Mutex evaluates it with mu_ held.
  static bool Admitted(const Ticket* ticket) ABSL_NO_THREAD_SAFETY_ANALYSIS {
    return ticket->number < ticket->pool->admitted_;
  }

  const double jitter_;
  absl::Mutex mu_;
  std::mt19937_64 random_ ABSL_GUARDED_BY(mu_);
  // Calls are numbered as they arrive; call n may take a slot once
  // admitted_ > n. admitted_ starts at the pool size and grows by one as
  // each call gives its slot back.
  int64_t next_ticket_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t admitted_ ABSL_GUARDED_BY(mu_);
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
