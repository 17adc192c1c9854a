#include "core/config/config_types.h"

#include <cstdint>
#include <vector>

namespace ferry {

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
