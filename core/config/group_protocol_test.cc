#include "core/config/group_protocol.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ferry {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::StartsWith;

TEST(GroupProtocolTest, ClassicTakesTheClassicProperties) {
  EXPECT_TRUE(CheckGroupProtocolProperties({{"session.timeout.ms", "6000", "f.yaml:2"},
                                            {"heartbeat.interval.ms", "500", "f.yaml:3"},
                                            {"partition.assignment.strategy", "range", "f.yaml:4"}})
                  .ok());
  EXPECT_TRUE(CheckGroupProtocolProperties({{"group.protocol", "classic", "f.yaml:1"},
                                            {"session.timeout.ms", "6000", "f.yaml:2"}})
                  .ok());
}

TEST(GroupProtocolTest, ConsumerWithoutClassicPropertiesIsFine) {
  EXPECT_TRUE(CheckGroupProtocolProperties({{"group.protocol", "consumer", "f.yaml:1"},
                                            {"group.remote.assignor", "uniform", "f.yaml:2"},
                                            {"max.poll.interval.ms", "300000", "f.yaml:3"}})
                  .ok());
}

TEST(GroupProtocolTest, ConsumerRejectsEachClassicOnlyPropertyWithItsLine) {
  for (const char* name : {"session.timeout.ms", "heartbeat.interval.ms",
                           "partition.assignment.strategy", "group.protocol.type"}) {
    absl::Status status = CheckGroupProtocolProperties(
        {{name, "1", "ferry.yaml:5"}, {"group.protocol", "consumer", "ferry.yaml:3"}});
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << name;
    EXPECT_THAT(std::string(status.message()),
                StartsWith(std::string("ferry.yaml:5: kafka.") + name +
                           ": not allowed with kafka.group.protocol: consumer (ferry.yaml:3)"));
  }
}

TEST(GroupProtocolTest, SaysWhatTakesThePlaceOfTheProperty) {
  absl::Status status = CheckGroupProtocolProperties(
      {{"group.protocol", "CONSUMER", ""}, {"partition.assignment.strategy", "range", ""}});
  EXPECT_THAT(std::string(status.message()),
              AllOf(StartsWith("kafka.partition.assignment.strategy: not allowed"),
                    HasSubstr("group.remote.assignor")));
}

TEST(GroupProtocolTest, UsesConsumerGroupProtocol) {
  EXPECT_FALSE(UsesConsumerGroupProtocol({}));
  EXPECT_FALSE(UsesConsumerGroupProtocol({{"group.protocol", "classic"}}));
  EXPECT_TRUE(UsesConsumerGroupProtocol({{"group.protocol", "consumer"}}));
  EXPECT_TRUE(UsesConsumerGroupProtocol({{"group.protocol", "Consumer"}}));
}

}  // namespace
}  // namespace ferry
