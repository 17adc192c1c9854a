#include "tests/kafka/key_order.h"

#include <algorithm>

#include "gtest/gtest.h"

namespace ferry::testing {

void CheckFirstDeliveriesInOrder(const std::vector<HandledEvent>& handled,
                                 std::map<std::string, int64_t>* in_order) {
  in_order->clear();
  std::map<std::string, std::vector<const HandledEvent*>> by_key;
  for (const HandledEvent& event : handled) by_key[event.key].push_back(&event);
  for (auto& [key, events] : by_key) {
    std::stable_sort(events.begin(), events.end(),
                     [](const HandledEvent* a, const HandledEvent* b) {
                       return a->monotonic_ns < b->monotonic_ns;
                     });
    int64_t next_first = 0;
    for (const HandledEvent* event : events) {
      if (event->sequence < next_first) continue;  // a redelivery
      ASSERT_EQ(event->sequence, next_first)
          << key << ": sequence " << event->sequence << " handled before the first delivery of "
          << next_first;
      ++next_first;
    }
    (*in_order)[key] = next_first;
  }
}

}  // namespace ferry::testing
