#include "tests/kafka/key_order.h"

#include <map>
#include <string>
#include <vector>

#include "gtest/gtest-spi.h"
#include "gtest/gtest.h"

namespace ferry::testing {
namespace {

HandledEvent Handled(const std::string& key, int64_t sequence, int64_t monotonic_ns) {
  HandledEvent event;
  event.key = key;
  event.sequence = sequence;
  event.monotonic_ns = monotonic_ns;
  return event;
}

TEST(KeyOrderTest, RedeliveriesAndOtherKeysInterleavedAreInOrder) {
  // Recorded out of time order across two workers; "a" 1 is redelivered after 2.
  const std::vector<HandledEvent> handled = {
      Handled("a", 2, 30), Handled("b", 0, 5),  Handled("a", 0, 10),
      Handled("a", 1, 20), Handled("a", 1, 40), Handled("b", 1, 50)};
  std::map<std::string, int64_t> in_order;
  ASSERT_NO_FATAL_FAILURE(CheckFirstDeliveriesInOrder(handled, &in_order));
  EXPECT_EQ(in_order, (std::map<std::string, int64_t>{{"a", 3}, {"b", 2}}));
}

// EXPECT_FATAL_FAILURE's statement may name no locals (and a comma in it
// would split the macro's arguments): each case is a function.
void CheckSkipOfOne() {
  std::map<std::string, int64_t> in_order;
  CheckFirstDeliveriesInOrder({Handled("k", 0, 1), Handled("k", 2, 2), Handled("k", 1, 3)},
                              &in_order);
}

void CheckStartAtOne() {
  std::map<std::string, int64_t> in_order;
  CheckFirstDeliveriesInOrder({Handled("k", 1, 1)}, &in_order);
}

TEST(KeyOrderTest, ASequenceBeforeTheFirstDeliveryOfItsPredecessorFails) {
  EXPECT_FATAL_FAILURE(CheckSkipOfOne(), "k: sequence 2 handled before the first delivery of 1");
}

TEST(KeyOrderTest, AKeyThatNeverStartsAtZeroFails) {
  EXPECT_FATAL_FAILURE(CheckStartAtOne(), "k: sequence 1 handled before the first delivery of 0");
}

TEST(KeyOrderTest, NothingHandledIsNoKeys) {
  std::map<std::string, int64_t> in_order = {{"stale", 1}};
  CheckFirstDeliveriesInOrder({}, &in_order);
  EXPECT_TRUE(in_order.empty());
}

}  // namespace
}  // namespace ferry::testing
