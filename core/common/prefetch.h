// Prefetch: asks the CPU for a cache line ahead of its use, so that misses on
// data that went cold (events buffered long before they are sent or
// finished) overlap instead of stalling one after another.
//
// Not __builtin_prefetch: GCC deletes a loop whose only effect is that
// builtin (C++'s -ffinite-loops at -O2), and the callers prefetch in such
// loops. The volatile asm keeps them.
//
// Threading: pure; a prefetch never faults and changes nothing visible.
#ifndef FERRY_CORE_COMMON_PREFETCH_H_
#define FERRY_CORE_COMMON_PREFETCH_H_

#include <cstddef>
#include <string>

namespace ferry {

inline constexpr size_t kCacheLine = 64;

// The cache line holding `address`, for reading.
inline void PrefetchLine(const void* address) {
#if defined(__x86_64__)
  asm volatile("prefetcht0 %0" : : "m"(*static_cast<const char*>(address)));
#else
  asm volatile("" : : "r"(address) : "memory");
  __builtin_prefetch(address);
#endif
}

// A std::string's bytes: its first `most` bytes, line by line (the string
// object itself must be in the cache already, or this waits for it).
inline void PrefetchBytes(const std::string& bytes, size_t most = kCacheLine) {
  const size_t size = bytes.size() < most ? bytes.size() : most;
  PrefetchLine(bytes.data());
  for (size_t at = kCacheLine; at < size; at += kCacheLine) PrefetchLine(bytes.data() + at);
}

}  // namespace ferry

#endif  // FERRY_CORE_COMMON_PREFETCH_H_
