#include "core/engine/event_router.h"

#include <string>
#include <vector>

#include "core/config/config.h"
#include "gtest/gtest.h"

namespace ferry {
namespace {

ProcessorConfig Processor(const std::string& name, std::vector<std::string> types) {
  ProcessorConfig processor;
  processor.name = name;
  processor.event_types = std::move(types);
  return processor;
}

TEST(EventRouterTest, TypesGoToTheProcessorNamingThemAndTheRestToTheStar) {
  Config config;
  config.processors = {Processor("a", {"order", "refund"}), Processor("b", {"*"}),
                       Processor("c", {"audit"})};
  const EventRouter router(config);
  EXPECT_EQ(router.ProcessorFor("order"), 0);
  EXPECT_EQ(router.ProcessorFor("refund"), 0);
  EXPECT_EQ(router.ProcessorFor("audit"), 2);
  EXPECT_EQ(router.ProcessorFor("other"), 1);
  EXPECT_EQ(router.ProcessorFor(""), 1);
  EXPECT_EQ(router.ProcessorFor("orde"), 1);    // a prefix is another name
  EXPECT_EQ(router.ProcessorFor("orders"), 1);  // and so is an extension
  EXPECT_EQ(router.default_processor(), 1);
}

TEST(EventRouterTest, WithoutAStarAnUnnamedTypeHasNoProcessor) {
  Config config;
  config.processors = {Processor("a", {"x"}), Processor("b", {"y"})};
  const EventRouter router(config);
  EXPECT_EQ(router.ProcessorFor("x"), 0);
  EXPECT_EQ(router.ProcessorFor("y"), 1);
  EXPECT_EQ(router.ProcessorFor("z"), -1);
  EXPECT_EQ(router.default_processor(), -1);
}

TEST(EventRouterTest, ATypeNamedTwiceGoesToTheLastProcessorNamingIt) {
  Config config;
  config.processors = {Processor("a", {"x"}), Processor("b", {"x"})};
  EXPECT_EQ(EventRouter(config).ProcessorFor("x"), 1);
}

// Past a handful of names the table is bisected instead of scanned.
TEST(EventRouterTest, ManyTypesAreFoundByBisection) {
  Config config;
  std::vector<std::string> types;
  for (int i = 0; i < 40; ++i) types.push_back("type-" + std::to_string(i));
  config.processors = {Processor("a", types), Processor("b", {"*"})};
  const EventRouter router(config);
  for (const std::string& type : types) EXPECT_EQ(router.ProcessorFor(type), 0) << type;
  EXPECT_EQ(router.ProcessorFor("type-40"), 1);
  EXPECT_EQ(router.ProcessorFor("type-"), 1);
  EXPECT_EQ(router.ProcessorFor("zzz"), 1);
  EXPECT_EQ(router.ProcessorFor(""), 1);
}

TEST(EventRouterTest, TopicsHaveTheirOrderingAndUnknownTopicsAreKeyOrdered) {
  Config config;
  config.topics = {TopicConfig{"u", Ordering::kUnordered}, TopicConfig{"p", Ordering::kPartition},
                   TopicConfig{"k", Ordering::kKey}};
  const EventRouter router(config);
  EXPECT_EQ(router.OrderingFor("u"), Ordering::kUnordered);
  EXPECT_EQ(router.OrderingFor("p"), Ordering::kPartition);
  EXPECT_EQ(router.OrderingFor("k"), Ordering::kKey);
  EXPECT_EQ(router.OrderingFor("unknown"), Ordering::kKey);
  EXPECT_EQ(router.OrderingFor(std::string(40, 'u')), Ordering::kKey);
}

}  // namespace
}  // namespace ferry
