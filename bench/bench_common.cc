#include "bench/bench_common.h"

#include <sys/resource.h>
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"

namespace ferry::bench {

int64_t WallMicros() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000 + ts.tv_nsec / 1000;
}

void FormatPayload(char kind, int64_t send_us, size_t size, std::string* out) {
  size = std::max(size, kPayloadHeader);
  out->assign(size, 'x');
  char header[kPayloadHeader + 1];
  std::snprintf(header, sizeof(header), "%c%016lld ", kind, static_cast<long long>(send_us));
  std::memcpy(out->data(), header, kPayloadHeader);
}

bool ParsePayload(absl::string_view value, char* kind, int64_t* send_us) {
  if (value.size() < kPayloadHeader || value[kPayloadHeader - 1] != ' ') return false;
  int64_t micros = 0;
  for (size_t i = 1; i < kPayloadHeader - 1; ++i) {
    const char c = value[i];
    if (c < '0' || c > '9') return false;
    micros = micros * 10 + (c - '0');
  }
  *kind = value[0];
  *send_us = micros;
  return true;
}

double ProcessCpuSeconds() {
  rusage usage;
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_utime.tv_sec + usage.ru_utime.tv_usec / 1e6 + usage.ru_stime.tv_sec +
         usage.ru_stime.tv_usec / 1e6;
}

int64_t PeakRssKib() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmHWM:", 0) == 0) {
      int64_t kib = 0;
      std::string digits;
      for (char c : line) {
        if (c >= '0' && c <= '9') digits.push_back(c);
      }
      if (absl::SimpleAtoi(digits, &kib)) return kib;
    }
  }
  return -1;
}

LatencyHistogram::LatencyHistogram() : buckets_(new std::atomic<uint64_t>[kBuckets]) {
  for (int64_t i = 0; i < kBuckets; ++i) buckets_[i].store(0, std::memory_order_relaxed);
}

void LatencyHistogram::Record(int64_t micros) {
  micros = std::max<int64_t>(0, micros);
  const int64_t bucket = std::min(micros / kBucketMicros, kBuckets - 1);
  buckets_[bucket].fetch_add(1, std::memory_order_relaxed);
  count_.fetch_add(1, std::memory_order_relaxed);
  sum_.fetch_add(micros, std::memory_order_relaxed);
  int64_t seen = max_.load(std::memory_order_relaxed);
  while (micros > seen && !max_.compare_exchange_weak(seen, micros, std::memory_order_relaxed)) {
  }
}

int64_t LatencyHistogram::Quantile(double q) const {
  const int64_t total = count();
  if (total == 0) return -1;
  const auto rank = static_cast<uint64_t>(std::max<double>(1, q * static_cast<double>(total)));
  uint64_t seen = 0;
  for (int64_t i = 0; i < kBuckets; ++i) {
    seen += buckets_[i].load(std::memory_order_relaxed);
    if (seen >= rank) return (i + 1) * kBucketMicros;
  }
  return kBuckets * kBucketMicros;
}

double LatencyHistogram::mean_micros() const {
  const int64_t total = count();
  return total == 0 ? 0.0 : static_cast<double>(sum_.load()) / static_cast<double>(total);
}

std::string LatencyHistogram::Json() const {
  return absl::StrFormat(
      "{\"count\":%d,\"p50_us\":%d,\"p90_us\":%d,\"p99_us\":%d,\"p999_us\":%d,\"max_us\":%d,"
      "\"mean_us\":%.1f}",
      count(), Quantile(0.5), Quantile(0.9), Quantile(0.99), Quantile(0.999), max_micros(),
      mean_micros());
}

bool WriteFileAtomically(const std::string& path, const std::string& text) {
  const std::string temp = path + ".tmp";
  FILE* file = std::fopen(temp.c_str(), "w");
  if (file == nullptr) return false;
  const bool written = std::fwrite(text.data(), 1, text.size(), file) == text.size();
  if (std::fclose(file) != 0 || !written) return false;
  return std::rename(temp.c_str(), path.c_str()) == 0;
}

}  // namespace ferry::bench
