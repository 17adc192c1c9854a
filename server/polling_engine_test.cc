#include "server/polling_engine.h"

#include <cstdlib>
#include <string>

#include "gtest/gtest.h"

namespace ferry {
namespace {

TEST(PollingEngineTest, PollIsTheDefault) {
  unsetenv(kPollStrategyVariable);
  UsePollEngineUnlessSet();
  const char* value = std::getenv(kPollStrategyVariable);
  ASSERT_NE(value, nullptr);
  EXPECT_EQ(std::string(value), "poll");
}

TEST(PollingEngineTest, AnOperatorsChoiceIsKept) {
  setenv(kPollStrategyVariable, "epoll1", 1);
  UsePollEngineUnlessSet();
  EXPECT_EQ(std::string(std::getenv(kPollStrategyVariable)), "epoll1");
  unsetenv(kPollStrategyVariable);
}

}  // namespace
}  // namespace ferry
