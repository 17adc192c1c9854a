#include "tests/netfaults/delivery_audit.h"

#include <set>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "tests/kafka/key_order.h"

namespace ferry::testing {
namespace {

constexpr size_t kMaxProblems = 10;

void Note(DeliveryAudit* audit, std::string problem) {
  if (audit->problems.size() < kMaxProblems) audit->problems.push_back(std::move(problem));
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
  const KeyOrder order = CheckKeyOrder(handled);
  audit.order_violations = static_cast<int64_t>(order.violations.size());
  for (const std::string& violation : order.violations) Note(&audit, violation);
  return audit;
}

}  // namespace ferry::testing
