#include "core/config/config_types.h"

#include <algorithm>
#include <cstdint>
#include <vector>

namespace ferry {

int64_t RateLimitConfig::EffectiveBurst() const {
  if (burst > 0) return burst;
  if (!limited()) return 0;
  return std::max<int64_t>(1, static_cast<int64_t>(events_per_second / 10));
}

int AutoLaneCount(const std::vector<ProcessorConfig>& processors) {
  constexpr int64_t kMinimum = 64;
  constexpr int64_t kMaximum = 16384;
  int64_t credit = 0;
  for (const ProcessorConfig& processor : processors) {
    credit += static_cast<int64_t>(processor.streams) * processor.max_in_flight;
  }
  int64_t lanes = kMinimum;
  while (lanes < 4 * credit && lanes < kMaximum) lanes *= 2;
  return static_cast<int>(lanes);
}

}  // namespace ferry
