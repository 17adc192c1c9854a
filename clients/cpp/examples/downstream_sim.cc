#include "clients/cpp/examples/downstream_sim.h"

#include <algorithm>
#include <cmath>

#include "absl/time/clock.h"

namespace ferry::examples {
namespace {
constexpr double kGrowth = 1.02;
}  // namespace

absl::Duration SimulatedPool::Call(absl::Duration work) {
  mu_.Lock();
  const Ticket ticket{this, next_ticket_++};
  mu_.Await(absl::Condition(&Admitted, &ticket));
  const double factor =
      1 + jitter_ * std::uniform_real_distribution<double>(-1, 1)(random_);
  mu_.Unlock();
  const absl::Time start = absl::Now();
  absl::SleepFor(work * factor);  // the query, holding its connection
  const absl::Duration held = absl::Now() - start;
  absl::MutexLock lock(&mu_);
  ++admitted_;
  return held;
}

int64_t SimulatedPool::Waiting() {
  absl::MutexLock lock(&mu_);
  return std::max<int64_t>(0, next_ticket_ - admitted_);
}

int64_t SimulatedPool::Arrived() {
  absl::MutexLock lock(&mu_);
  return next_ticket_;
}

bool Outage::Down(absl::Time now) {
  if (down_for_ <= absl::ZeroDuration()) return false;
  const int64_t now_ns = absl::ToUnixNanos(now);
  int64_t first = 0;
  // The first caller starts the outage; later ones read its start.
  if (first_call_ns_.compare_exchange_strong(first, now_ns)) first = now_ns;
  return now_ns - first < absl::ToInt64Nanoseconds(down_for_);
}

void LatencyHistogram::Record(absl::Duration latency) {
  const double micros = std::max(1.0, absl::ToDoubleMicroseconds(latency));
  // Clamped as a double: an infinite latency must not reach the int cast.
  const double index = std::log(micros) / std::log(kGrowth);
  const int bucket = index >= kBuckets - 1 ? kBuckets - 1 : static_cast<int>(index);
  buckets_[bucket].fetch_add(1, std::memory_order_relaxed);
  count_.fetch_add(1, std::memory_order_relaxed);
}

int64_t LatencyHistogram::QuantileMicros(double q) const {
  const int64_t total = count();
  if (total == 0) return 0;
  // The rank of the quantile, 1-based: the smallest value with at least
  // q x total values at or below it.
  const int64_t rank = std::max<int64_t>(1, static_cast<int64_t>(std::ceil(q * total)));
  int64_t seen = 0;
  for (int i = 0; i < kBuckets; ++i) {
    seen += buckets_[i].load(std::memory_order_relaxed);
    if (seen >= rank) return static_cast<int64_t>(std::ceil(std::pow(kGrowth, i + 1)));
  }
  return static_cast<int64_t>(std::ceil(std::pow(kGrowth, kBuckets)));
}

}  // namespace ferry::examples
