// What the network-fault tests conclude from the workers' record files and
// the dead-letter topic, in the chaos test's terms: an event is lost when no
// worker acked it (answer OK) and it is not in the dead-letter topic;
// duplicated counts handler runs beyond the first per event; a per-key order
// violation is a first delivery of a key's sequence n before that of n-1
// (later runs of an earlier sequence are redeliveries, allowed).
//
// Events come from kafka_tool produce (payload = the key's sequence number,
// keys of one produce call numbered from 0), so (key, sequence) names an
// event and every offset below a partition's end must have been handled.
//
// Threading: plain functions.
#ifndef FERRY_TESTS_NETFAULTS_DELIVERY_AUDIT_H_
#define FERRY_TESTS_NETFAULTS_DELIVERY_AUDIT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "tests/e2e/e2e_support.h"
#include "tests/tools/kafka_admin.h"

namespace ferry::testing {

struct DeliveryAudit {
  int64_t events = 0;         // sum of the end offsets
  int64_t handled = 0;        // handler runs over all record files
  int64_t lost = 0;           // offsets neither acked nor dead-lettered
  int64_t duplicated = 0;     // handled - distinct offsets handled
  int64_t dead_lettered = 0;  // records in the dead-letter topic
  int64_t order_violations = 0;
  std::vector<std::string> problems;  // the first few lost offsets / violations

  // "lost=0 duplicated=12 dead_lettered=0 ...", for the test's output.
  std::string Summary() const;
};

// `end` is the topic's end offsets; `dead_letters` the dead-letter topic's
// records (their partition/offset headers name the source record).
DeliveryAudit AuditDeliveries(const std::vector<HandledEvent>& handled,
                              const test_tools::OffsetMap& end,
                              const std::vector<test_tools::ConsumedRecord>& dead_letters);

}  // namespace ferry::testing

#endif  // FERRY_TESTS_NETFAULTS_DELIVERY_AUDIT_H_
