// The per-key order check of the multi-replica tests (consumer_group_test,
// rollout_test, the network-fault tests' delivery audit): from what the
// example workers recorded, each key's first deliveries must come in sequence
// order, 0, 1, 2, ..., whichever replica handled them; a run of an earlier
// sequence (a redelivery) may come at any time.
//
// Threading: a pure function of its argument.
#ifndef FERRY_TESTS_KAFKA_KEY_ORDER_H_
#define FERRY_TESTS_KAFKA_KEY_ORDER_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "tests/e2e/e2e_support.h"

namespace ferry::testing {

struct KeyOrder {
  // Per key: one past the highest sequence first delivered; with no
  // violation, how many distinct sequences were handled (0 .. n-1).
  std::map<std::string, int64_t> first_delivered;
  // "<key>: sequence <n> handled before the first delivery of <m>", one per
  // first delivery that skipped ahead, in key order.
  std::vector<std::string> violations;
};

// Orders each key's events of `handled` by when they were handled (stable
// for equal times: CLOCK_MONOTONIC is shared by every process) and checks
// their first deliveries.
KeyOrder CheckKeyOrder(const std::vector<HandledEvent>& handled);

}  // namespace ferry::testing

#endif  // FERRY_TESTS_KAFKA_KEY_ORDER_H_
