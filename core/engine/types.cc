#include "core/engine/types.h"

#include "absl/strings/str_cat.h"

namespace ferry {

std::string TopicPartition::ToString() const { return absl::StrCat(topic, "/", partition); }

const char* BreakerStateName(BreakerState state) {
  switch (state) {
    case BreakerState::kOpen:
      return "open";
    case BreakerState::kHalfOpen:
      return "half_open";
    case BreakerState::kClosed:
      break;
  }
  return "closed";
}

}  // namespace ferry
