#include "core/common/backoff.h"

#include <limits>

#include "absl/random/random.h"
#include "gtest/gtest.h"

namespace ferry {
namespace {

constexpr BackoffPolicy kPolicy{absl::Milliseconds(100), absl::Seconds(5)};

TEST(BackoffTest, DoublesPerFailureUpToTheCap) {
  EXPECT_EQ(BackoffCeiling(kPolicy, 1), absl::Milliseconds(100));
  EXPECT_EQ(BackoffCeiling(kPolicy, 2), absl::Milliseconds(200));
  EXPECT_EQ(BackoffCeiling(kPolicy, 3), absl::Milliseconds(400));
  EXPECT_EQ(BackoffCeiling(kPolicy, 6), absl::Milliseconds(3200));
  EXPECT_EQ(BackoffCeiling(kPolicy, 7), absl::Seconds(5));
  EXPECT_EQ(BackoffCeiling(kPolicy, 1000), absl::Seconds(5));
}

TEST(BackoffTest, HugeOrNonsenseFailureCountsStayBounded) {
  EXPECT_EQ(BackoffCeiling(kPolicy, std::numeric_limits<int>::max()), absl::Seconds(5));
  // Zero or negative counts (never produced, but not trusted) get the initial wait.
  EXPECT_EQ(BackoffCeiling(kPolicy, 0), absl::Milliseconds(100));
  EXPECT_EQ(BackoffCeiling(kPolicy, -5), absl::Milliseconds(100));
}

TEST(BackoffTest, InitialAboveMaxIsCapped) {
  EXPECT_EQ(BackoffCeiling({absl::Seconds(10), absl::Seconds(1)}, 1), absl::Seconds(1));
}

TEST(BackoffTest, JitterStaysWithinHalfAndFullAndSpreads) {
  absl::BitGen random;
  absl::Duration lowest = absl::InfiniteDuration();
  absl::Duration highest = absl::ZeroDuration();
  for (int i = 0; i < 2000; ++i) {
    const absl::Duration wait = JitteredBackoff(kPolicy, 3, random);
    ASSERT_GE(wait, absl::Milliseconds(200));
    ASSERT_LE(wait, absl::Milliseconds(400));
    lowest = std::min(lowest, wait);
    highest = std::max(highest, wait);
  }
  // Not one fixed value: waiters that failed together spread out.
  EXPECT_LT(lowest, absl::Milliseconds(250));
  EXPECT_GT(highest, absl::Milliseconds(350));
}

}  // namespace
}  // namespace ferry
