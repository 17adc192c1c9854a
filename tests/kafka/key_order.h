// The per-key order check of the multi-replica tests (consumer_group_test,
// rollout_test): from what the example workers recorded, each key's first
// deliveries must come in sequence order, 0, 1, 2, ..., whichever replica
// handled them; a redelivery of an earlier sequence may come at any time.
//
// Threading: a plain function; gtest assertions, so call it from the test's
// thread.
#ifndef FERRY_TESTS_KAFKA_KEY_ORDER_H_
#define FERRY_TESTS_KAFKA_KEY_ORDER_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "tests/e2e/e2e_support.h"

namespace ferry::testing {

// Orders each key's events of `handled` by when they were handled (stable
// for equal times) and asserts (fatally: wrap the call in
// ASSERT_NO_FATAL_FAILURE) that every sequence is first handled after the
// first delivery of the one before it. Fills `*in_order` with, per key, how
// many distinct sequences were handled from 0 on.
void CheckFirstDeliveriesInOrder(const std::vector<HandledEvent>& handled,
                                 std::map<std::string, int64_t>* in_order);

}  // namespace ferry::testing

#endif  // FERRY_TESTS_KAFKA_KEY_ORDER_H_
