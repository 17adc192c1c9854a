#include "core/config/kafka_property_validator.h"

#include <string>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ferry {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

std::string Rejection(const KafkaProperty& property) {
  absl::Status status = ValidateKafkaProperties({property});
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << property.name;
  return std::string(status.message());
}

TEST(KafkaPropertyValidatorTest, AcceptsWhatLibrdkafkaAccepts) {
  EXPECT_TRUE(ValidateKafkaProperties({{"bootstrap.servers", "a:9092,b:9092", "f.yaml:2"},
                                       {"session.timeout.ms", "6000", "f.yaml:3"},
                                       {"auto.offset.reset", "latest", "f.yaml:4"},
                                       {"enable.auto.commit", "false", "f.yaml:5"},
                                       {"security.protocol", "SASL_SSL", "f.yaml:6"}})
                  .ok());
  EXPECT_TRUE(ValidateKafkaProperties({}).ok());
}

TEST(KafkaPropertyValidatorTest, NotANumberIsRejectedWithTheLine) {
  EXPECT_THAT(Rejection({"session.timeout.ms", "banana", "ferry.yaml:4"}),
              StartsWith("ferry.yaml:4: kafka.session.timeout.ms: librdkafka rejects "
                         "\"banana\": "));
}

TEST(KafkaPropertyValidatorTest, OutOfRangeIsRejected) {
  EXPECT_THAT(Rejection({"session.timeout.ms", "99999999999", "ferry.yaml:4"}),
              AllOf(StartsWith("ferry.yaml:4: kafka.session.timeout.ms: librdkafka rejects "),
                    HasSubstr("range")));
}

TEST(KafkaPropertyValidatorTest, UnknownEnumValueIsRejected) {
  EXPECT_THAT(Rejection({"auto.offset.reset", "sideways", "ferry.yaml:7"}),
              StartsWith("ferry.yaml:7: kafka.auto.offset.reset: librdkafka rejects "
                         "\"sideways\": "));
}

TEST(KafkaPropertyValidatorTest, UnknownPropertyIsRejected) {
  EXPECT_THAT(Rejection({"bogus.property", "1", "ferry.yaml:9"}),
              StartsWith("ferry.yaml:9: kafka.bogus.property: not a librdkafka property"));
}

TEST(KafkaPropertyValidatorTest, FirstBadPropertyIsNamedAfterGoodOnes) {
  absl::Status status = ValidateKafkaProperties({{"group.id", "g", "ferry.yaml:2"},
                                                 {"fetch.wait.max.msx", "10", "ferry.yaml:3"},
                                                 {"bogus", "1", "ferry.yaml:4"}});
  EXPECT_THAT(std::string(status.message()),
              StartsWith("ferry.yaml:3: kafka.fetch.wait.max.msx: "));
}

TEST(KafkaPropertyValidatorTest, WithoutLocationNamesTheKey) {
  EXPECT_THAT(Rejection({"auto.offset.reset", "sideways", ""}),
              StartsWith("kafka.auto.offset.reset: librdkafka rejects"));
}

TEST(KafkaPropertyValidatorTest, ControlCharactersInValuesAreEscaped) {
  EXPECT_THAT(Rejection({"bogus\nERROR forged", "1", "ferry.yaml:4"}), Not(HasSubstr("\n")));
  EXPECT_THAT(Rejection({"auto.offset.reset", "x\nERROR forged", "ferry.yaml:4"}),
              Not(HasSubstr("\n")));
  EXPECT_THAT(Rejection({"session.timeout.ms", "x\nERROR forged", "ferry.yaml:4"}),
              HasSubstr("\"x\\nERROR forged\""));
}

TEST(KafkaPropertyValidatorTest, SecretValuesAreNotEchoedByUs) {
  // Not a property librdkafka knows, but named like a secret: its value
  // must not end up in a log line.
  EXPECT_THAT(Rejection({"sasl.password.typo", "hunter2", "ferry.yaml:5"}),
              Not(HasSubstr("hunter2")));
}

}  // namespace
}  // namespace ferry
