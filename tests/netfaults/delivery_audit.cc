#include "tests/netfaults/delivery_audit.h"

#include <algorithm>
#include <map>
#include <set>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace ferry::testing {
namespace {

constexpr size_t kMaxProblems = 10;

void Note(DeliveryAudit* audit, std::string problem) {
  if (audit->problems.size() < kMaxProblems) audit->problems.push_back(std::move(problem));
}

// First deliveries per key in produce order (by handler start time, one
// CLOCK_MONOTONIC for every process).
void CheckKeyOrder(const std::vector<HandledEvent>& handled, DeliveryAudit* audit) {
  std::map<std::string, std::vector<const HandledEvent*>> by_key;
  for (const HandledEvent& event : handled) by_key[event.key].push_back(&event);
  for (auto& [key, events] : by_key) {
    std::stable_sort(events.begin(), events.end(), [](const HandledEvent* a, const HandledEvent* b) {
      return a->monotonic_ns < b->monotonic_ns;
    });
    int64_t next_first = 0;
    for (const HandledEvent* event : events) {
      if (event->sequence < next_first) continue;  // a redelivery
      if (event->sequence > next_first) {
        ++audit->order_violations;
        Note(audit, absl::StrCat(key, ": sequence ", event->sequence,
                                 " handled before the first delivery of ", next_first));
      }
      next_first = event->sequence + 1;
    }
  }
}

}  // namespace

std::string DeliveryAudit::Summary() const {
  return absl::StrCat("events=", events, " handled=", handled, " lost=", lost,
                      " duplicated=", duplicated, " dead_lettered=", dead_lettered,
                      " order_violations=", order_violations);
}

DeliveryAudit AuditDeliveries(const std::vector<HandledEvent>& handled,
                              const test_tools::OffsetMap& end,
                              const std::vector<test_tools::ConsumedRecord>& dead_letters) {
  DeliveryAudit audit;
  audit.handled = static_cast<int64_t>(handled.size());
  audit.dead_lettered = static_cast<int64_t>(dead_letters.size());
  std::set<std::pair<int32_t, int64_t>> acked;
  std::set<std::pair<int32_t, int64_t>> runs;
  for (const HandledEvent& event : handled) {
    runs.insert({event.partition, event.offset});
    if (event.answer.empty() || event.answer == "OK") acked.insert({event.partition, event.offset});
  }
  audit.duplicated = audit.handled - static_cast<int64_t>(runs.size());
  std::set<std::pair<int32_t, int64_t>> dead;
  for (const test_tools::ConsumedRecord& record : dead_letters) {
    int32_t partition = -1;
    int64_t offset = -1;
    if (absl::SimpleAtoi(record.Header("ferry.source.partition"), &partition) &&
        absl::SimpleAtoi(record.Header("ferry.source.offset"), &offset)) {
      dead.insert({partition, offset});
    }
  }
  for (const auto& [partition, end_offset] : end) {
    audit.events += end_offset;
    for (int64_t offset = 0; offset < end_offset; ++offset) {
      if (acked.count({partition, offset}) > 0 || dead.count({partition, offset}) > 0) continue;
      ++audit.lost;
      Note(&audit, absl::StrCat("partition ", partition, " offset ", offset, " lost"));
    }
  }
  CheckKeyOrder(handled, &audit);
  return audit;
}

}  // namespace ferry::testing
