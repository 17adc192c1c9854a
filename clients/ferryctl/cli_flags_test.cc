// The hand-written flag parser: both spellings of names, values that keep
// their dashes, bools, "given" vs default, and the errors ferryctl turns into
// exit code 2.
#include "clients/ferryctl/cli_flags.h"

#include <string>
#include <vector>

#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ferry::ferryctl {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

const std::vector<FlagSpec> kKnown = {
    {"topic", false}, {"to_offset", false}, {"dry_run", true}, {"wait", false}, {"all", true}};

TEST(CommandLineTest, DashedAndUnderscoredNamesAreTheSameFlag) {
  absl::StatusOr<CommandLine> dashed = CommandLine::Parse({"reset", "--dry-run"}, kKnown);
  absl::StatusOr<CommandLine> underscored = CommandLine::Parse({"reset", "--dry_run"}, kKnown);
  ASSERT_TRUE(dashed.ok()) << dashed.status();
  ASSERT_TRUE(underscored.ok()) << underscored.status();
  EXPECT_TRUE(*dashed->Get<bool>("dry_run", false));
  EXPECT_TRUE(*underscored->Get<bool>("dry_run", false));
  EXPECT_THAT(dashed->positional(), ElementsAre("reset"));
}

TEST(CommandLineTest, ValuesKeepTheirDashes) {
  absl::StatusOr<CommandLine> separate = CommandLine::Parse({"--topic", "my-topic"}, kKnown);
  absl::StatusOr<CommandLine> joined = CommandLine::Parse({"--topic=my-topic"}, kKnown);
  ASSERT_TRUE(separate.ok() && joined.ok());
  EXPECT_EQ(*separate->Get<std::string>("topic", ""), "my-topic");
  EXPECT_EQ(*joined->Get<std::string>("topic", ""), "my-topic");
}

TEST(CommandLineTest, GivenIsKnownEvenForADefaultValue) {
  // --to-offset=0 must count as given: 0 is a valid target offset.
  absl::StatusOr<CommandLine> line = CommandLine::Parse({"--to-offset", "0"}, kKnown);
  ASSERT_TRUE(line.ok()) << line.status();
  EXPECT_TRUE(line->Has("to_offset"));
  EXPECT_FALSE(line->Has("topic"));
  EXPECT_EQ(*line->Get<int64_t>("to_offset", 7), 0);
  EXPECT_EQ(*line->Get<std::string>("topic", "fallback"), "fallback");
  EXPECT_THAT(line->Given(), ElementsAre("to_offset"));
}

TEST(CommandLineTest, NegativeNumbersAreValuesAndPositionals) {
  absl::StatusOr<CommandLine> line = CommandLine::Parse({"--to-offset", "-1", "-5"}, kKnown);
  ASSERT_TRUE(line.ok()) << line.status();
  EXPECT_EQ(*line->Get<int64_t>("to_offset", 0), -1);
  EXPECT_THAT(line->positional(), ElementsAre("-5"));
}

TEST(CommandLineTest, BoolForms) {
  absl::StatusOr<CommandLine> off = CommandLine::Parse({"--dry-run=false", "-all"}, kKnown);
  ASSERT_TRUE(off.ok()) << off.status();
  EXPECT_FALSE(*off->Get<bool>("dry_run", true));
  EXPECT_TRUE(*off->Get<bool>("all", false));
  absl::StatusOr<CommandLine> negated = CommandLine::Parse({"--nodry-run"}, kKnown);
  ASSERT_TRUE(negated.ok()) << negated.status();
  EXPECT_FALSE(*negated->Get<bool>("dry_run", true));
  // A bool never takes the next argument as its value.
  absl::StatusOr<CommandLine> next = CommandLine::Parse({"--all", "pause"}, kKnown);
  ASSERT_TRUE(next.ok());
  EXPECT_THAT(next->positional(), ElementsAre("pause"));
}

TEST(CommandLineTest, LastRepeatWinsAndDoubleDashEndsFlags) {
  absl::StatusOr<CommandLine> line =
      CommandLine::Parse({"--topic=a", "--topic=b", "--", "--all"}, kKnown);
  ASSERT_TRUE(line.ok()) << line.status();
  EXPECT_EQ(*line->Get<std::string>("topic", ""), "b");
  EXPECT_FALSE(line->Has("all"));
  EXPECT_THAT(line->positional(), ElementsAre("--all"));
}

TEST(CommandLineTest, Errors) {
  absl::StatusOr<CommandLine> unknown = CommandLine::Parse({"--bogus=1"}, kKnown);
  EXPECT_THAT(unknown.status().message(), HasSubstr("unknown flag --bogus=1"));
  absl::StatusOr<CommandLine> no_value = CommandLine::Parse({"--topic"}, kKnown);
  EXPECT_THAT(no_value.status().message(), HasSubstr("--topic needs a value"));
  absl::StatusOr<CommandLine> flag_as_value = CommandLine::Parse({"--topic", "--all"}, kKnown);
  EXPECT_FALSE(flag_as_value.ok());
  // --no<name> only negates bools.
  EXPECT_FALSE(CommandLine::Parse({"--notopic"}, kKnown).ok());

  absl::StatusOr<CommandLine> bad_duration = CommandLine::Parse({"--wait=soon"}, kKnown);
  ASSERT_TRUE(bad_duration.ok());
  absl::StatusOr<absl::Duration> wait = bad_duration->Get<absl::Duration>("wait", {});
  EXPECT_THAT(wait.status().message(), HasSubstr("--wait=soon"));
  absl::StatusOr<CommandLine> good_duration = CommandLine::Parse({"--wait=1m30s"}, kKnown);
  EXPECT_EQ(*good_duration->Get<absl::Duration>("wait", {}), absl::Seconds(90));
}

}  // namespace
}  // namespace ferry::ferryctl
