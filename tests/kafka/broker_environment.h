// One real Kafka broker per test binary, for tests that run ferry against it.
//
// A test file registers the environment once (at namespace scope):
//
//   const ::testing::Environment* const kBroker =
//       ::testing::AddGlobalTestEnvironment(new BrokerEnvironment("my_test"));
//
// and derives its fixtures from RealKafkaTest. The broker starts on gtest's
// main thread before the first test (KafkaBroker must be started from a
// thread that outlives it) and stops after the last one. A broker that
// cannot start fails every test with its log tail; nothing is skipped.
//
// Threading: broker() and bootstrap() from any thread once the tests run.
#ifndef FERRY_TESTS_KAFKA_BROKER_ENVIRONMENT_H_
#define FERRY_TESTS_KAFKA_BROKER_ENVIRONMENT_H_

#include <memory>
#include <string>

#include "gtest/gtest.h"
#include "tests/kafka/kafka_broker.h"

namespace ferry::testing {

class BrokerEnvironment : public ::testing::Environment {
 public:
  // `name` labels the startup line printed to stdout.
  explicit BrokerEnvironment(std::string name) : name_(std::move(name)) {}
  // A broker started with `options` (e.g. extra listeners).
  BrokerEnvironment(std::string name, KafkaBroker::Options options)
      : name_(std::move(name)), options_(std::move(options)) {}
  void SetUp() override;
  void TearDown() override;

  // The running broker, or nullptr when it could not start (see error()).
  static KafkaBroker* broker();
  static const std::string& error();

 private:
  std::string name_;
  KafkaBroker::Options options_;
};

// Fails the test at once when the broker is missing; prints the broker's log
// tail after a failed test.
class RealKafkaTest : public ::testing::Test {
 protected:
  void SetUp() override;
  void TearDown() override;

  static KafkaBroker& broker() { return *BrokerEnvironment::broker(); }
  static const std::string& bootstrap() { return BrokerEnvironment::broker()->bootstrap(); }
};

}  // namespace ferry::testing

#endif  // FERRY_TESTS_KAFKA_BROKER_ENVIRONMENT_H_
