#include "tests/kafka/key_order.h"

#include <map>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ferry::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

HandledEvent Handled(const std::string& key, int64_t sequence, int64_t monotonic_ns) {
  HandledEvent event;
  event.key = key;
  event.sequence = sequence;
  event.monotonic_ns = monotonic_ns;
  return event;
}

TEST(KeyOrderTest, RedeliveriesAndOtherKeysInterleavedAreInOrder) {
  // Recorded out of time order (two workers' files); "a" 1 runs again after 2.
  const KeyOrder order = CheckKeyOrder({Handled("a", 2, 30), Handled("b", 0, 5),
                                        Handled("a", 0, 10), Handled("a", 1, 20),
                                        Handled("a", 1, 40), Handled("b", 1, 50)});
  EXPECT_THAT(order.violations, IsEmpty());
  EXPECT_EQ(order.first_delivered, (std::map<std::string, int64_t>{{"a", 3}, {"b", 2}}));
}

TEST(KeyOrderTest, ASequenceBeforeTheFirstDeliveryOfItsPredecessorIsAViolation) {
  const KeyOrder order =
      CheckKeyOrder({Handled("k", 0, 1), Handled("k", 2, 2), Handled("k", 1, 3)});
  EXPECT_THAT(order.violations,
              ElementsAre("k: sequence 2 handled before the first delivery of 1"));
}

TEST(KeyOrderTest, AKeyThatDoesNotStartAtZeroIsAViolation) {
  const KeyOrder order = CheckKeyOrder({Handled("k", 1, 1), Handled("j", 0, 1)});
  EXPECT_THAT(order.violations,
              ElementsAre("k: sequence 1 handled before the first delivery of 0"));
}

TEST(KeyOrderTest, EqualTimesKeepTheRecordedOrder) {
  EXPECT_THAT(CheckKeyOrder({Handled("k", 0, 7), Handled("k", 1, 7)}).violations, IsEmpty());
  EXPECT_THAT(CheckKeyOrder({Handled("k", 1, 7), Handled("k", 0, 7)}).violations,
              ElementsAre("k: sequence 1 handled before the first delivery of 0"));
}

TEST(KeyOrderTest, NothingHandledIsNoKeys) {
  const KeyOrder order = CheckKeyOrder({});
  EXPECT_THAT(order.violations, IsEmpty());
  EXPECT_THAT(order.first_delivered, IsEmpty());
}

}  // namespace
}  // namespace ferry::testing
