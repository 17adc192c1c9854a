// Delays, priority classes, the delay budget, and event types known at
// startup that must have a processor.
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

using ::ferry::testing::kMinimal;
using ::ferry::testing::ExpectError;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;
using ::testing::UnorderedElementsAre;

TEST(ConfigSchedulingTest, DelaysPrioritiesAndTheDelayBudget) {
  absl::StatusOr<Config> config = ParseConfig(R"(topics:
  - name: orders
    priority: high
    delay: 30s
    delays:
      order.reminder: 1h
      order.cancelled: 0s
  - name: audit
priorities:
  classes:
    high: 6
    medium: 3
    low: 1
  default: low
  event_types:
    payment.refund: medium
budgets:
  max_delayed_events: 2500
processors:
  - name: default
    target: ipv4:127.0.0.1:50051
)",
                                              "ferry.yaml");
  ASSERT_TRUE(config.ok()) << config.status();
  const TopicConfig& orders = config->topics[0];
  EXPECT_EQ(orders.priority, "high");
  EXPECT_EQ(orders.delay, absl::Seconds(30));
  EXPECT_THAT(orders.delays, UnorderedElementsAre(Pair("order.reminder", absl::Hours(1)),
                                                  Pair("order.cancelled", absl::ZeroDuration())));
  EXPECT_EQ(config->topics[1].priority, "");
  EXPECT_EQ(config->topics[1].delay, absl::ZeroDuration());
  ASSERT_EQ(config->priority_classes.size(), 3u);
  EXPECT_EQ(config->priority_classes[0].name, "high");  // listed order kept
  EXPECT_EQ(config->priority_classes[0].weight, 6);
  EXPECT_EQ(config->priority_classes[1].name, "medium");
  EXPECT_EQ(config->priority_classes[2].name, "low");
  EXPECT_EQ(config->priority_classes[2].weight, 1);
  EXPECT_EQ(config->default_priority, "low");
  EXPECT_THAT(config->priority_by_type, ElementsAre(Pair("payment.refund", "medium")));
  EXPECT_EQ(config->max_delayed_events, 2500);
}

TEST(ConfigSchedulingTest, Defaults) {
  absl::StatusOr<Config> config = ParseConfig(kMinimal, "ferry.yaml");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_TRUE(config->priority_classes.empty());
  EXPECT_EQ(config->topics[0].delay, absl::ZeroDuration());
  EXPECT_TRUE(config->topics[0].delays.empty());
  EXPECT_EQ(config->topics[0].priority, "");
  EXPECT_EQ(config->max_delayed_events, config->max_buffered_events);
  // The delay budget follows budgets.max_buffered_events unless set.
  config = ParseConfig(absl::StrCat(kMinimal, "budgets:\n  max_buffered_events: 777\n"),
                       "ferry.yaml");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->max_delayed_events, 777);
  // Every topic named: no default class needed.
  config = ParseConfig(R"(topics:
  - name: orders
    priority: only
priorities:
  classes: {only: 1}
processors:
  - name: default
    target: ipv4:127.0.0.1:50051
)",
                       "ferry.yaml");
  ASSERT_TRUE(config.ok()) << config.status();
}

TEST(ConfigSchedulingTest, DelayErrors) {
  auto topic = [](const std::string& lines) {
    return absl::StrCat("topics:\n  - name: orders\n", lines,
                        "processors:\n  - name: default\n    target: ipv4:127.0.0.1:1\n");
  };
  std::string message = ExpectError(topic("    delay: 3 sec\n"), 3, "topics[0].delay");
  EXPECT_THAT(message, HasSubstr("invalid duration"));
  message = ExpectError(topic("    delay: 30\n"), 3, "topics[0].delay");
  EXPECT_THAT(message, HasSubstr("has no unit"));
  message = ExpectError(topic("    delay: -5s\n"), 3, "topics[0].delay");
  EXPECT_THAT(message, HasSubstr("must not be negative"));
  message = ExpectError(topic("    delays: 5s\n"), 3, "topics[0].delays");
  EXPECT_THAT(message, HasSubstr("map of event type to delay"));
  message = ExpectError(topic("    delays:\n"), 3, "topics[0].delays");
  message = ExpectError(topic("    delays:\n      a: 1h\n      b: soon\n"), 5,
                        "topics[0].delays.b");
  EXPECT_THAT(message, HasSubstr("invalid duration"));
  message = ExpectError(topic("    delays:\n      a: 1h\n      a: 2h\n"), 5,
                        "topics[0].delays.a");
  EXPECT_THAT(message, HasSubstr("set twice"));
  message = ExpectError(absl::StrCat(kMinimal, "budgets:\n  max_delayed_events: 0\n"), 7,
                        "budgets.max_delayed_events");
  EXPECT_THAT(message, HasSubstr("at least 1"));
}

TEST(ConfigSchedulingTest, PriorityErrors) {
  const std::string processors =
      "processors:\n  - name: default\n    target: ipv4:127.0.0.1:1\n";
  // A topic names a class, but there are no priorities.
  std::string message = ExpectError(
      absl::StrCat("topics:\n  - name: orders\n    priority: high\n", processors), 3,
      "topics[0].priority");
  EXPECT_THAT(message, HasSubstr("no priorities are configured"));
  // A class that does not exist.
  message = ExpectError(absl::StrCat("topics:\n  - name: orders\n    priority: urgent\n",
                                     "priorities:\n  classes: {high: 6, low: 1}\n",
                                     "  default: low\n", processors),
                        3, "topics[0].priority");
  EXPECT_THAT(message, HasSubstr("unknown priority class \"urgent\" (classes: high, low)"));
  // No default and a topic without a class.
  message = ExpectError(absl::StrCat("topics:\n  - name: orders\n    priority: high\n",
                                     "  - name: audit\n",
                                     "priorities:\n  classes: {high: 6, low: 1}\n", processors),
                        4, "topics[1].priority");
  EXPECT_THAT(message, HasSubstr("set priorities.default"));
  const std::string topics = "topics:\n  - name: orders\n";
  message = ExpectError(absl::StrCat(topics, "priorities:\n  default: low\n", processors), 4,
                        "priorities.classes");
  EXPECT_THAT(message, HasSubstr("missing"));
  message = ExpectError(absl::StrCat(topics, "priorities:\n  classes:\n", processors), 4,
                        "priorities.classes");
  EXPECT_THAT(message, HasSubstr("map of class name to weight"));
  message = ExpectError(absl::StrCat(topics, "priorities:\n  classes: [high, low]\n", processors),
                        4, "priorities.classes");
  message = ExpectError(
      absl::StrCat(topics, "priorities:\n  classes:\n    high: 0\n", processors), 5,
      "priorities.classes.high");
  EXPECT_THAT(message, HasSubstr("at least 1"));
  message = ExpectError(
      absl::StrCat(topics, "priorities:\n  classes:\n    high: 2.5\n", processors), 5,
      "priorities.classes.high");
  EXPECT_THAT(message, HasSubstr("whole number"));
  message = ExpectError(
      absl::StrCat(topics, "priorities:\n  classes:\n    high: 5000\n", processors), 5,
      "priorities.classes.high");
  EXPECT_THAT(message, HasSubstr("at most 1000"));
  message = ExpectError(
      absl::StrCat(topics, "priorities:\n  classes: {high: 6}\n  default: normal\n", processors),
      5, "priorities.default");
  EXPECT_THAT(message, HasSubstr("unknown priority class \"normal\""));
  message = ExpectError(absl::StrCat(topics,
                                     "priorities:\n  classes: {high: 6}\n  default: high\n",
                                     "  event_types:\n    refund: hihg\n", processors),
                        7, "priorities.event_types.refund");
  EXPECT_THAT(message, HasSubstr("unknown priority class \"hihg\""));
  message = ExpectError(absl::StrCat(topics,
                                     "priorities:\n  classes: {high: 6}\n  default: high\n",
                                     "  event_types: [refund]\n", processors),
                        6, "priorities.event_types");
  message = ExpectError(
      absl::StrCat(topics, "priorities:\n  classes: {high: 6}\n  weights: {}\n", processors), 5,
      "priorities.weights");
  EXPECT_THAT(message, HasSubstr("unknown key (known keys: classes, default, event_types)"));
}

TEST(ConfigSchedulingTest, EventTypesKnownAtStartupMustHaveAProcessor) {
  const std::string processors =
      "processors:\n  - name: billing\n    target: ipv4:127.0.0.1:1\n"
      "    event_types: [order]\n";
  // type: const:X with no processor for X.
  std::string message = ExpectError(
      absl::StrCat("topics:\n  - name: orders\n    type: const:refund\n", processors), 3,
      "topics[0].type");
  EXPECT_THAT(message, HasSubstr("event type \"refund\", which no processor handles"));
  // The default type is the topic name.
  message = ExpectError(absl::StrCat("topics:\n  - name: orders\n", processors), 2,
                        "topics[0].type");
  EXPECT_THAT(message, HasSubstr("every record of topic \"orders\" has event type \"orders\""));
  message = ExpectError(
      absl::StrCat("topics:\n  - name: orders\n    key: record_key\n    type: topic\n", processors),
      4, "topics[0].type");
  // Handled by name, by "*", or not known until run time: fine.
  for (const std::string& good :
       {absl::StrCat("topics:\n  - name: x\n    type: const:order\n", processors),
        absl::StrCat("topics:\n  - name: order\n", processors),
        absl::StrCat("topics:\n  - name: x\n    type: header:type\n", processors),
        absl::StrCat("topics:\n  - name: x\n    type: json:/type\n", processors),
        std::string("topics:\n  - name: x\n    type: const:anything\n"
                    "processors:\n  - name: a\n    target: ipv4:127.0.0.1:1\n"
                    "    event_types: [order]\n  - name: b\n    target: ipv4:127.0.0.1:2\n")}) {
    absl::StatusOr<Config> config = ParseConfig(good, "ferry.yaml");
    EXPECT_TRUE(config.ok()) << config.status() << "\n" << good;
  }
}

}  // namespace
}  // namespace ferry
