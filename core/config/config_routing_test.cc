// `topics:` and `processors:`: required sections, unique names, field
// sources and ordering, which processor claims which event type, and the
// lane count that follows the processors' credit.
#include <cstdint>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "core/config/config.h"
#include "core/config/config_test_support.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/mocks/config_fixtures.h"

namespace ferry {
namespace {

using ::ferry::testing::ExpectError;
using ::testing::HasSubstr;

TEST(ConfigTest, LaneCountFollowsTheProcessorsCreditUnlessSet) {
  const std::string two_processors = R"(topics:
  - name: orders
processors:
  - name: a
    target: ipv4:127.0.0.1:1
    streams: 1
    max_in_flight: 10
    event_types: [x]
  - name: b
    target: ipv4:127.0.0.1:2
    streams: 3
    max_in_flight: 100
)";
  // 4 x (10 + 300) = 1240, rounded up to a power of two.
  absl::StatusOr<Config> config = ParseConfig(two_processors, "ferry.yaml");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->lane_count, 2048);
  config = ParseConfig(absl::StrCat(two_processors, "lanes:\n  count: auto\n"), "ferry.yaml");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->lane_count, 2048);
  config = ParseConfig(absl::StrCat(two_processors, "lanes:\n  count: 100\n"), "ferry.yaml");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->lane_count, 100);

  ProcessorConfig small;
  small.streams = 1;
  small.max_in_flight = 1;
  EXPECT_EQ(AutoLaneCount({small}), 64);  // the floor
  ProcessorConfig huge;
  huge.streams = 64;
  huge.max_in_flight = 4096;
  EXPECT_EQ(AutoLaneCount({huge}), 16384);  // the ceiling
  EXPECT_EQ(AutoLaneCount({}), 64);
}

TEST(ConfigTest, BadFieldSourceAndOrdering) {
  std::string message = ExpectError(R"(topics:
  - name: orders
    key: json:user/id
processors:
  - name: default
    target: ipv4:127.0.0.1:50051
)",
                                    3, "topics[0].key");
  EXPECT_THAT(message, HasSubstr("must start with '/'"));
  message = ExpectError(R"(topics:
  - name: orders
    type: headers:x
processors:
  - name: default
    target: ipv4:127.0.0.1:50051
)",
                        3, "topics[0].type");
  EXPECT_THAT(message, HasSubstr("record_key, header:NAME"));
  message = ExpectError(R"(topics:
  - name: orders
    ordering: strict
processors:
  - name: default
    target: ipv4:127.0.0.1:50051
)",
                        3, "topics[0].ordering");
  EXPECT_THAT(message, HasSubstr("key, partition or unordered"));
}

TEST(ConfigTest, MissingTopics) {
  std::string message = ExpectError(R"(kafka:
  group.id: g
processors:
  - name: default
    target: ipv4:127.0.0.1:50051
)",
                                    1, "topics");
  EXPECT_THAT(message, HasSubstr("missing"));
  message = ExpectError(R"(topics: []
processors:
  - name: default
    target: ipv4:127.0.0.1:50051
)",
                        1, "topics");
  EXPECT_THAT(message, HasSubstr("at least one topic"));
  ExpectError(R"(topics:
  - ordering: key
processors:
  - name: default
    target: ipv4:127.0.0.1:50051
)",
              2, "topics[0].name");
}

TEST(ConfigTest, MissingProcessors) {
  std::string message =
      ExpectError("topics:\n  - name: orders\n", 1, "processors");
  EXPECT_THAT(message, HasSubstr("missing"));
}

TEST(ConfigTest, MissingProcessorTarget) {
  std::string message = ExpectError(R"(topics:
  - name: orders
processors:
  - name: a
    target: ipv4:127.0.0.1:50051
    event_types: [x]
  - name: b
    streams: 1
)",
                                    7, "processors[1].target");
  EXPECT_THAT(message, HasSubstr("missing"));
  message = ExpectError(R"(topics:
  - name: orders
processors:
  - name: a
    target: ""
)",
                        5, "processors[0].target");
  EXPECT_THAT(message, HasSubstr("must not be empty"));
}

TEST(ConfigTest, DuplicateProcessorNames) {
  std::string message = ExpectError(R"(topics:
  - name: orders
processors:
  - name: workers
    target: ipv4:127.0.0.1:50051
    event_types: [a]
  - name: workers
    target: ipv4:127.0.0.1:50052
    event_types: [b]
)",
                                    7, "processors[1].name");
  EXPECT_THAT(message, HasSubstr("\"workers\""));
  EXPECT_THAT(message, HasSubstr("processors[0]"));
}

TEST(ConfigTest, DuplicateTopicNames) {
  ExpectError(R"(topics:
  - name: orders
  - name: orders
processors:
  - name: a
    target: t
)",
              3, "topics[1].name");
}

TEST(ConfigTest, TwoProcessorsClaimEverything) {
  std::string message = ExpectError(R"(topics:
  - name: orders
processors:
  - name: a
    target: ipv4:127.0.0.1:50051
  - name: b
    target: ipv4:127.0.0.1:50052
    event_types: ["*"]
)",
                                    8, "processors[1].event_types");
  EXPECT_THAT(message, HasSubstr("\"*\""));
  EXPECT_THAT(message, HasSubstr("processor \"a\""));
}

TEST(ConfigTest, EventTypeClaimedTwice) {
  std::string message = ExpectError(R"(topics:
  - name: orders
processors:
  - name: a
    target: ipv4:127.0.0.1:50051
    event_types: [order.created, order.paid]
  - name: b
    target: ipv4:127.0.0.1:50052
    event_types:
      - order.paid
)",
                                    9, "processors[1].event_types");
  EXPECT_THAT(message, HasSubstr("\"order.paid\""));
}

}  // namespace
}  // namespace ferry
