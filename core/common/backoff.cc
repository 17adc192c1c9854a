#include "core/common/backoff.h"

#include <algorithm>

#include "absl/random/distributions.h"

namespace ferry {

absl::Duration BackoffCeiling(const BackoffPolicy& policy, int failures) {
  absl::Duration backoff = policy.initial;
  // Doubling stops once past the cap, so a huge `failures` costs nothing.
  for (int i = 1; i < failures && backoff < policy.max; ++i) backoff *= 2;
  return std::min(backoff, policy.max);
}

absl::Duration JitteredBackoff(const BackoffPolicy& policy, int failures,
                               absl::BitGenRef random) {
  return BackoffCeiling(policy, failures) * absl::Uniform(random, 0.5, 1.0);
}

}  // namespace ferry
