#include "tests/netfaults/steady_producer.h"

#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "tests/e2e/e2e_support.h"
#include "tests/e2e/subprocess.h"

namespace ferry::testing {

SteadyProducer::SteadyProducer(std::string bootstrap, std::string topic, int partitions,
                               int per_round, absl::Duration interval)
    : bootstrap_(std::move(bootstrap)),
      topic_(std::move(topic)),
      partitions_(partitions),
      per_round_(per_round),
      interval_(interval) {
  thread_ = std::thread([this] { Run(); });
}

int64_t SteadyProducer::Stop() {
  if (!stop_.HasBeenNotified()) stop_.Notify();
  if (thread_.joinable()) thread_.join();
  return produced_;
}

void SteadyProducer::Run() {
  for (int round = 0; !stop_.HasBeenNotified(); ++round) {
    absl::StatusOr<Subprocess> produce = Subprocess::Start(
        {"tests/tools/kafka_tool", "produce", "--bootstrap=" + bootstrap_, "--topic=" + topic_,
         absl::StrCat("--count=", per_round_), "--keys=20",
         absl::StrCat("--partitions=", partitions_), absl::StrCat("--key_prefix=r", round, "-")},
        TempPath(absl::StrCat("produce-", topic_, ".log")));
    absl::StatusOr<int> exit = produce.ok() ? produce->Wait(absl::Seconds(60)) : produce.status();
    if (!exit.ok() || *exit != 0) {
      error_ = exit.ok() ? absl::StrCat("kafka_tool produce exited with ", *exit)
                         : exit.status().ToString();
      return;
    }
    produced_ += per_round_;
    stop_.WaitForNotificationWithTimeout(interval_);  // the rate, not a synchronisation
  }
}

}  // namespace ferry::testing
