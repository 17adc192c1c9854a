#include "core/engine/intake_budget.h"

#include <algorithm>

#include "core/config/config.h"

namespace ferry {

IntakeBudget::IntakeBudget(const Config& config)
    : max_events_(config.max_buffered_events),
      max_bytes_(config.max_buffered_bytes),
      max_delayed_(config.max_delayed_events),
      resume_fraction_(config.resume_fraction) {}

IntakeBudget::Headroom IntakeBudget::Room(int64_t delayed) const {
  Headroom room;
  room.events = std::min<int64_t>(max_events_ - events_, max_delayed_ - delayed);
  room.bytes = max_bytes_ - bytes_;
  return room;
}

bool IntakeBudget::OverHighWatermark(int64_t delayed, bool lane_full) const {
  return events_ >= max_events_ || bytes_ >= max_bytes_ || delayed >= max_delayed_ || lane_full;
}

bool IntakeBudget::UnderLowWatermark(int64_t delayed, bool lanes_drained) const {
  if (events_ > static_cast<int64_t>(max_events_ * resume_fraction_)) return false;
  if (bytes_ > static_cast<int64_t>(max_bytes_ * resume_fraction_)) return false;
  if (delayed > static_cast<int64_t>(max_delayed_ * resume_fraction_)) return false;
  return lanes_drained;
}

}  // namespace ferry
