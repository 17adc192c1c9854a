#include "tests/kafka/broker_environment.h"

#include <cstdio>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace ferry::testing {
namespace {

std::unique_ptr<KafkaBroker>& Broker() {
  static auto* broker = new std::unique_ptr<KafkaBroker>();
  return *broker;
}

std::string& StartError() {
  static auto* error = new std::string("the broker environment was not registered");
  return *error;
}

}  // namespace

void BrokerEnvironment::SetUp() {
  if (Broker() != nullptr) return;
  const absl::Time start = absl::Now();
  absl::StatusOr<std::unique_ptr<KafkaBroker>> broker = KafkaBroker::Start(options_);
  if (!broker.ok()) {
    StartError() = "Kafka broker did not start: " + broker.status().ToString();
    std::printf("%s: %s\n", name_.c_str(), StartError().c_str());
    return;
  }
  Broker() = *std::move(broker);
  StartError().clear();
  std::printf("%s: Kafka broker at %s ready in %s\n", name_.c_str(),
              Broker()->bootstrap().c_str(), absl::FormatDuration(absl::Now() - start).c_str());
  std::fflush(stdout);
}

void BrokerEnvironment::TearDown() {
  if (Broker() == nullptr) return;
  absl::Status stopped = Broker()->Stop();
  if (!stopped.ok()) {
    std::printf("%s: broker stop: %s\n", name_.c_str(), stopped.ToString().c_str());
  }
  Broker().reset();
}

KafkaBroker* BrokerEnvironment::broker() { return Broker().get(); }
const std::string& BrokerEnvironment::error() { return StartError(); }

void RealKafkaTest::SetUp() {
  if (BrokerEnvironment::broker() == nullptr) GTEST_FAIL() << BrokerEnvironment::error();
}

void RealKafkaTest::TearDown() {
  if (HasFailure() && BrokerEnvironment::broker() != nullptr) {
    std::printf("%s", BrokerEnvironment::broker()->LogTail(60).c_str());
  }
}

}  // namespace ferry::testing
