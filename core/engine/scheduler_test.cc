#include "core/engine/scheduler.h"

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ferry {
namespace {

// Picks `n` times with every class in `active`; returns the picks.
std::vector<int> Picks(WeightedRoundRobin& wrr, const std::vector<bool>& active, int n) {
  std::vector<int> picks;
  for (int i = 0; i < n; ++i) {
    const int c = wrr.Choose(active);
    if (c < 0) break;
    wrr.Commit(active, c);
    picks.push_back(c);
  }
  return picks;
}

TEST(WeightedRoundRobinTest, SharesFollowTheWeightsExactlyAndInterleave) {
  WeightedRoundRobin wrr({6, 3, 1});
  const std::vector<int> picks = Picks(wrr, {true, true, true}, 1000);
  std::vector<int> count(3, 0);
  for (int c : picks) ++count[c];
  EXPECT_EQ(count[0], 600);
  EXPECT_EQ(count[1], 300);
  EXPECT_EQ(count[2], 100);
  // Every window of 10 consecutive picks holds exactly 6:3:1 (smooth, not
  // 6 high in a row then 3 medium...).
  for (size_t start = 0; start + 10 <= picks.size(); start += 10) {
    std::vector<int> window(3, 0);
    for (size_t i = start; i < start + 10; ++i) ++window[picks[i]];
    EXPECT_EQ(window, (std::vector<int>{6, 3, 1})) << "window at " << start;
  }
  // High never gets more than 3 picks in a row.
  int run = 0;
  for (int c : picks) {
    run = c == 0 ? run + 1 : 0;
    EXPECT_LE(run, 3);
  }
}

TEST(WeightedRoundRobinTest, AnIdleClassLendsItsShare) {
  WeightedRoundRobin wrr({6, 3, 1});
  // Only low has work: it gets every pick.
  for (int c : Picks(wrr, {false, false, true}, 100)) EXPECT_EQ(c, 2);
  // High and low: 6:1.
  std::vector<int> count(3, 0);
  for (int c : Picks(wrr, {true, false, true}, 700)) ++count[c];
  EXPECT_NEAR(count[0], 600, 1);
  EXPECT_NEAR(count[2], 100, 1);
  EXPECT_EQ(count[1], 0);
  EXPECT_EQ(wrr.Choose({false, false, false}), -1);
}

TEST(WeightedRoundRobinTest, NoClassWithWorkWaitsMoreThanOneRoundOfWeights) {
  // Extreme weights: the weight-1 class is still served within every 101
  // picks (the sum of the busy classes' weights), including right after it
  // had been idle for a long time.
  WeightedRoundRobin wrr({100, 1});
  Picks(wrr, {true, false}, 5000);
  const std::vector<int> picks = Picks(wrr, {true, true}, 5000);
  int since_low = 0;
  int longest = 0;
  for (int c : picks) {
    since_low = c == 1 ? 0 : since_low + 1;
    longest = std::max(longest, since_low);
  }
  EXPECT_LE(longest, 101);
  int low = 0;
  for (int c : picks) low += c == 1;
  EXPECT_NEAR(low, 5000 / 101, 2);
}

TEST(WeightedRoundRobinTest, ActivityChangesKeepScoresBounded) {
  // Classes come and go at random; no class ever waits more than the total
  // weight while it has work, and shares over the steady tail are exact.
  WeightedRoundRobin wrr({6, 3, 1});
  uint32_t seed = 12345;
  std::vector<int> waiting(3, 0);
  for (int i = 0; i < 20000; ++i) {
    seed = seed * 1103515245 + 12345;
    std::vector<bool> active = {(seed >> 16 & 1) != 0, (seed >> 17 & 1) != 0,
                                (seed >> 18 & 1) != 0};
    const int c = wrr.Choose(active);
    if (c < 0) continue;
    wrr.Commit(active, c);
    for (int k = 0; k < 3; ++k) {
      if (!active[k] || k == c) {
        waiting[k] = 0;
      } else {
        EXPECT_LE(++waiting[k], 10) << "class " << k << " at pick " << i;
      }
    }
  }
}

Config ThreeClassConfig() {
  Config config;
  config.priority_classes = {{"high", 6}, {"medium", 3}, {"low", 1}};
  config.default_priority = "low";
  TopicConfig orders{"orders"};
  orders.priority = "high";
  orders.delay = absl::Seconds(5);
  orders.delays["order.reminder"] = absl::Hours(1);
  orders.delays["order.now"] = absl::ZeroDuration();
  TopicConfig audit{"audit"};
  config.topics = {orders, audit};
  config.priority_by_type["refund"] = "medium";
  return config;
}

TEST(SchedulingPlanTest, RoutesTopicsAndTypesToFlowsOfTheirClass) {
  const SchedulingPlan plan(ThreeClassConfig());
  ASSERT_EQ(plan.class_count(), 3);
  EXPECT_EQ(plan.class_name(0), "high");
  // orders: high (its own) + medium (refund may come on any topic); audit:
  // low (the default) + medium; other topics: low + medium.
  EXPECT_EQ(plan.flow_count(), 6);
  const SchedulingPlan::Route order = plan.RouteFor("orders", "order.created");
  EXPECT_EQ(plan.class_of_flow(order.flow), 0);
  EXPECT_EQ(order.delay, absl::Seconds(5));
  EXPECT_EQ(plan.RouteFor("orders", "order.reminder").delay, absl::Hours(1));
  EXPECT_EQ(plan.RouteFor("orders", "order.now").delay, absl::ZeroDuration());
  EXPECT_EQ(plan.RouteFor("orders", "order.now").flow, order.flow);
  const SchedulingPlan::Route refund = plan.RouteFor("orders", "refund");
  EXPECT_EQ(plan.class_of_flow(refund.flow), 1);
  EXPECT_NE(refund.flow, plan.RouteFor("audit", "refund").flow);
  const SchedulingPlan::Route audit = plan.RouteFor("audit", "x");
  EXPECT_EQ(plan.class_of_flow(audit.flow), 2);
  EXPECT_EQ(audit.delay, absl::ZeroDuration());
  EXPECT_NE(plan.RouteFor("elsewhere", "x").flow, audit.flow);
  EXPECT_TRUE(plan.has_delays());
  // The high class has one flow; medium one per topic slot (3), in topic order.
  EXPECT_THAT(plan.flows_of_class(0), ::testing::ElementsAre(order.flow));
  EXPECT_EQ(plan.flows_of_class(1).size(), 3u);
  EXPECT_EQ(plan.flows_of_class(1)[0], refund.flow);
}

TEST(SchedulingPlanTest, WithoutPrioritiesEveryTopicIsAFlowOfOneClass) {
  Config config;
  config.topics = {TopicConfig{"a", Ordering::kKey},
                   TopicConfig{"b", Ordering::kUnordered}};
  const SchedulingPlan plan(config);
  EXPECT_EQ(plan.class_count(), 1);
  EXPECT_EQ(plan.flow_count(), 3);  // a, b, other
  EXPECT_EQ(plan.RouteFor("a", "t").flow, 0);
  EXPECT_EQ(plan.RouteFor("b", "t").flow, 1);
  EXPECT_EQ(plan.RouteFor("zzz", "t").flow, 2);
  EXPECT_FALSE(plan.has_delays());
}

TEST(SchedulerTest, RoundRobinAcrossTheFlowsOfAClassSkippingEmptyOnes) {
  Config config;
  config.topics = {TopicConfig{"a", Ordering::kKey},
                   TopicConfig{"b", Ordering::kKey},
                   TopicConfig{"c", Ordering::kKey}};
  const SchedulingPlan plan(config);
  Scheduler scheduler(plan, 1);
  std::map<int, int> backlog = {{0, 100}, {1, 2}, {2, 0}};
  auto has_work = [&backlog](int flow) { return backlog[flow] > 0; };
  auto take = [&backlog](int flow) -> std::optional<int> {
    if (backlog[flow] == 0) return std::nullopt;
    --backlog[flow];
    return flow;
  };
  std::vector<int> served;
  for (int i = 0; i < 6; ++i) served.push_back(*scheduler.Next(0, has_work, take));
  EXPECT_THAT(served, ::testing::ElementsAre(0, 1, 0, 1, 0, 0));
}

TEST(SchedulerTest, AClassWhoseFlowsYieldNothingIsNotCharged) {
  Config config;
  config.priority_classes = {{"high", 1}, {"low", 1}};
  config.default_priority = "low";
  TopicConfig high{"high"};
  high.priority = "high";
  config.topics = {high, TopicConfig{"low", Ordering::kKey}};
  const SchedulingPlan plan(config);
  Scheduler scheduler(plan, 1);
  const int high_flow = plan.RouteFor("high", "t").flow;
  // The high flow claims work but yields nothing (e.g. stale ready lanes).
  int low_taken = 0;
  auto has_work = [](int) { return true; };
  auto take = [&](int flow) -> std::optional<int> {
    if (flow == high_flow) return std::nullopt;
    ++low_taken;
    return flow;
  };
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(scheduler.Next(0, has_work, take).has_value());
  EXPECT_EQ(low_taken, 10);
  auto nothing = [](int) -> std::optional<int> { return std::nullopt; };
  EXPECT_FALSE(scheduler.Next(0, has_work, nothing).has_value());
}

}  // namespace
}  // namespace ferry
