// Shared pieces of ferry's benchmark tools (bench/README.md).
//
// Record values: the first kPayloadHeader bytes are
//   <kind><16 decimal digits: wall-clock send time in microseconds>' '
// then filler up to the value size. kind: 'B' backlog (produced before a
// throughput run), 'W' warm-up (rate runs; not measured), 'T' timed (rate
// runs; its latency is measured).
#ifndef FERRY_BENCH_BENCH_COMMON_H_
#define FERRY_BENCH_BENCH_COMMON_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/strings/string_view.h"

namespace ferry::bench {

inline constexpr size_t kPayloadHeader = 18;

// Wall clock (CLOCK_REALTIME), microseconds since the epoch.
int64_t WallMicros();

// Writes a value of `size` bytes (at least kPayloadHeader) into `out`.
void FormatPayload(char kind, int64_t send_us, size_t size, std::string* out);

// The kind and send time of a value written by FormatPayload; false when it
// is not one.
bool ParsePayload(absl::string_view value, char* kind, int64_t* send_us);

// This process' CPU time (user + system), seconds.
double ProcessCpuSeconds();
// This process' peak resident set (VmHWM), KiB; -1 when unknown.
int64_t PeakRssKib();

// Latencies in 10 us buckets up to 10 s (the last bucket takes the rest);
// thread-safe and lock-free.
class LatencyHistogram {
 public:
  static constexpr int64_t kBucketMicros = 10;
  static constexpr int64_t kBuckets = 1000000;

  LatencyHistogram();
  void Record(int64_t micros);
  int64_t count() const { return count_.load(std::memory_order_relaxed); }
  // The latency (microseconds, the upper edge of its bucket) below which a
  // fraction q of the samples lie; -1 without samples.
  int64_t Quantile(double q) const;
  int64_t max_micros() const { return max_.load(std::memory_order_relaxed); }
  double mean_micros() const;
  // {"count":..,"p50_us":..,"p90_us":..,"p99_us":..,"p999_us":..,"max_us":..,"mean_us":..}
  std::string Json() const;

 private:
  std::unique_ptr<std::atomic<uint64_t>[]> buckets_;
  std::atomic<int64_t> count_{0};
  std::atomic<int64_t> sum_{0};
  std::atomic<int64_t> max_{0};
};

// Writes `text` to `path` atomically (temporary file + rename).
bool WriteFileAtomically(const std::string& path, const std::string& text);

}  // namespace ferry::bench

#endif  // FERRY_BENCH_BENCH_COMMON_H_
