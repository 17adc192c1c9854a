#include "tests/kafka/key_order.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace ferry::testing {

KeyOrder CheckKeyOrder(const std::vector<HandledEvent>& handled) {
  KeyOrder order;
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
      if (event->sequence > next_first) {
        order.violations.push_back(absl::StrCat(key, ": sequence ", event->sequence,
                                                " handled before the first delivery of ",
                                                next_first));
      }
      next_first = event->sequence + 1;
    }
    order.first_delivered[key] = next_first;
  }
  return order;
}

}  // namespace ferry::testing
