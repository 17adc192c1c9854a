#include "server/stop_sequence.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ferry {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

TEST(StopSequenceTest, StopsInReverseOrderOnceEach) {
  std::vector<std::string> ran;
  StopSequence sequence;
  for (const char* name : {"a", "b", "c"}) {
    sequence.Started(name, [&ran, name] { ran.push_back(name); });
  }
  sequence.StopAll();
  sequence.StopAll();  // idempotent
  EXPECT_THAT(ran, ElementsAre("c", "b", "a"));
  EXPECT_THAT(sequence.started(), ElementsAre("a", "b", "c"));
  EXPECT_THAT(sequence.stopped(), ElementsAre("c", "b", "a"));
}

TEST(StopSequenceTest, WhatStartsAfterAStopIsStoppedByTheNext) {
  std::vector<std::string> ran;
  StopSequence sequence;
  sequence.Started("a", [&ran] { ran.push_back("a"); });
  sequence.StopAll();
  sequence.Started("b", [&ran] { ran.push_back("b"); });
  sequence.StopAll();
  EXPECT_THAT(ran, ElementsAre("a", "b"));
}

TEST(StopSequenceTest, NothingStartedNothingStopped) {
  StopSequence sequence;
  sequence.StopAll();
  EXPECT_THAT(sequence.stopped(), IsEmpty());
}

}  // namespace
}  // namespace ferry
