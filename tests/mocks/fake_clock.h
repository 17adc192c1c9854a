// FakeClock: a Clock tests move by hand.
//
// Threading: safe from any thread.
#ifndef FERRY_TESTS_MOCKS_FAKE_CLOCK_H_
#define FERRY_TESTS_MOCKS_FAKE_CLOCK_H_

#include "absl/synchronization/mutex.h"
#include "core/common/clock.h"

namespace ferry::testing {

class FakeClock final : public Clock {
 public:
  explicit FakeClock(absl::Time start = absl::FromUnixSeconds(1'800'000'000)) : now_(start) {}
  absl::Time Now() const override {
    absl::MutexLock lock(&mu_);
    return now_;
  }
  void Advance(absl::Duration duration) {
    absl::MutexLock lock(&mu_);
    now_ += duration;
  }

 private:
  mutable absl::Mutex mu_;
  absl::Time now_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ferry::testing

#endif  // FERRY_TESTS_MOCKS_FAKE_CLOCK_H_
