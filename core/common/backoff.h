// Backoff: the one exponential backoff with jitter ferry uses for waits that
// grow with consecutive failures (a RETRY's next attempt in the engine, a
// worker stream's reconnect in the worker pool).
//
// The n-th consecutive failure waits `initial` doubled n-1 times, capped at
// `max`, then scaled by a uniform jitter in [50%, 100%] so many waiters that
// failed together spread out instead of retrying in lock step.
//
// Threading: pure functions; the caller owns the random generator and its
// synchronization.
#ifndef FERRY_CORE_COMMON_BACKOFF_H_
#define FERRY_CORE_COMMON_BACKOFF_H_

#include "absl/random/bit_gen_ref.h"
#include "absl/time/time.h"

namespace ferry {

struct BackoffPolicy {
  absl::Duration initial;
  absl::Duration max;
};

// The wait before retrying after `failures` consecutive failures (1 for the
// first), without jitter: initial * 2^(failures-1), at most `max`.
absl::Duration BackoffCeiling(const BackoffPolicy& policy, int failures);

// BackoffCeiling with jitter in [50%, 100%] of it.
absl::Duration JitteredBackoff(const BackoffPolicy& policy, int failures, absl::BitGenRef random);

}  // namespace ferry

#endif  // FERRY_CORE_COMMON_BACKOFF_H_
