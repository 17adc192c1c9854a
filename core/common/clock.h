// Clock: the engine's source of time, injected so tests control deadlines.
//
// Threading: implementations must be safe to call from any thread.
#ifndef FERRY_CORE_COMMON_CLOCK_H_
#define FERRY_CORE_COMMON_CLOCK_H_

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace ferry {

class Clock {
 public:
  virtual ~Clock() = default;
  virtual absl::Time Now() const = 0;
};

class RealClock final : public Clock {
 public:
  absl::Time Now() const override { return absl::Now(); }
  static RealClock* Get() {
    static RealClock* clock = new RealClock();
    return clock;
  }
};

}  // namespace ferry

#endif  // FERRY_CORE_COMMON_CLOCK_H_
