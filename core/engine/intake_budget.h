// IntakeBudget: how many consumed-but-unfinished events and bytes the engine
// holds, against the budgets that make the consumer pause and resume fetching
// (max_buffered_events, max_buffered_bytes, max_delayed_events and their
// resume_fraction low marks).
//
// Threading: not thread-safe; guarded by the Engine's mutex.
#ifndef FERRY_CORE_ENGINE_INTAKE_BUDGET_H_
#define FERRY_CORE_ENGINE_INTAKE_BUDGET_H_

#include <cstdint>

namespace ferry {

struct Config;

class IntakeBudget {
 public:
  struct Headroom {
    int64_t events = 0;
    int64_t bytes = 0;
  };

  explicit IntakeBudget(const Config& config);

  void Add(int64_t bytes) {
    ++events_;
    bytes_ += bytes;
  }
  void Release(int64_t bytes) {
    --events_;
    bytes_ -= bytes;
  }
  int64_t events() const { return events_; }
  int64_t bytes() const { return bytes_; }

  // What may still come in, given `delayed` events in the delay stage.
  Headroom Room(int64_t delayed) const;
  // A budget is reached (or `lane_full`): pause fetching.
  bool OverHighWatermark(int64_t delayed, bool lane_full) const;
  // Every budget is under its low mark (and `lanes_drained`): resume.
  bool UnderLowWatermark(int64_t delayed, bool lanes_drained) const;

 private:
  const int64_t max_events_;
  const int64_t max_bytes_;
  const int64_t max_delayed_;
  const double resume_fraction_;
  int64_t events_ = 0;
  int64_t bytes_ = 0;
};

}  // namespace ferry

#endif  // FERRY_CORE_ENGINE_INTAKE_BUDGET_H_
