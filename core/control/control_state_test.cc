// ControlState, the pure fold of the control log: no Kafka, no mock cluster.
// Records are fed in the orders a log can hold them, including the ones a
// healthy ferry never writes (duplicates, results before their command,
// unknown kinds, garbage).
#include "core/control/control_state.h"

#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "ferry/v1/control_log.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/mocks/engine_fixtures.h"

namespace ferry {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::UnorderedElementsAre;
using testing::RateLimitRecord;
using v1::internal::ControlLogRecord;

const TopicPartition kT0{"t", 0};
const TopicPartition kT1{"t", 1};
const TopicPartition kU0{"u", 0};
const std::vector<TopicPartition> kOwned = {kT0, kT1, kU0};
constexpr int64_t kNowMs = 1'000'000;

ControlLogRecord Pause(bool paused, const std::string& topic, std::vector<int32_t> partitions = {},
                       const std::string& id = "", int64_t ack_until_ms = 0) {
  ControlLogRecord record;
  record.set_command_id(id);
  v1::internal::PauseChange* change = record.mutable_pause();
  change->set_paused(paused);
  if (topic.empty()) {
    change->set_all(true);
  } else {
    change->set_topic(topic);
  }
  for (int32_t partition : partitions) change->add_partitions(partition);
  change->set_ack_until_ms(ack_until_ms);
  return record;
}

ControlLogRecord Reset(const std::string& id,
                       const std::vector<std::pair<TopicPartition, int64_t>>& targets) {
  ControlLogRecord record;
  record.set_command_id(id);
  v1::internal::ResetCommand* reset = record.mutable_reset();
  for (const auto& [tp, offset] : targets) {
    v1::internal::ResetTarget* target = reset->add_targets();
    target->set_topic(tp.topic);
    target->set_partition(tp.partition);
    target->set_offset(offset);
  }
  return record;
}

ControlLogRecord Skip(const std::string& id, const TopicPartition& tp, int64_t offset,
                      int64_t expires_at_ms) {
  ControlLogRecord record;
  record.set_command_id(id);
  v1::internal::SkipCommand* skip = record.mutable_skip();
  skip->set_topic(tp.topic);
  skip->set_partition(tp.partition);
  skip->set_offset(offset);
  skip->set_expires_at_ms(expires_at_ms);
  return record;
}

ControlLogRecord Result(const std::string& id, const TopicPartition& tp,
                        const std::string& by = "replica-a") {
  ControlLogRecord record;
  record.set_issued_by(by);
  v1::internal::CommandResult* result = record.mutable_result();
  result->set_command_id(id);
  result->set_topic(tp.topic);
  result->set_partition(tp.partition);
  result->set_ok(true);
  return record;
}

std::vector<std::string> Text(const std::vector<ControlState::PendingReset>& resets) {
  std::vector<std::string> out;
  for (const auto& r : resets) {
    out.push_back(absl::StrCat(r.command_id, " ", r.partition.ToString(), "@", r.offset));
  }
  return out;
}

std::vector<std::string> Text(const std::vector<ControlState::PendingSkip>& skips) {
  std::vector<std::string> out;
  for (const auto& s : skips) {
    out.push_back(absl::StrCat(s.command_id, " ", s.partition.ToString(), "@", s.offset));
  }
  return out;
}

std::vector<std::string> Text(const std::vector<ControlState::PendingAck>& acks) {
  std::vector<std::string> out;
  for (const auto& a : acks) out.push_back(absl::StrCat(a.command_id, " ", a.partition.ToString()));
  return out;
}

TEST(ControlStateTest, PauseChangesFoldInLogOrder) {
  ControlState state;
  ASSERT_TRUE(state.Apply(Pause(true, "t")));
  ASSERT_TRUE(state.Apply(Pause(false, "t", {1})));
  EXPECT_THAT(state.Paused(kOwned), UnorderedElementsAre(kT0));
  EXPECT_THAT(state.PauseCommands(), ElementsAre("pause t", "resume t/1"));
  // The same changes the other way round end the other way.
  ControlState reversed;
  ASSERT_TRUE(reversed.Apply(Pause(false, "t", {1})));
  ASSERT_TRUE(reversed.Apply(Pause(true, "t")));
  EXPECT_THAT(reversed.Paused(kOwned), UnorderedElementsAre(kT0, kT1));
}

TEST(ControlStateTest, AChangeForAllOverridesEverythingBefore) {
  ControlState state;
  ASSERT_TRUE(state.Apply(Pause(true, "t", {0})));
  ASSERT_TRUE(state.Apply(Pause(true, "u")));
  ASSERT_TRUE(state.Apply(Pause(false, "")));
  EXPECT_THAT(state.Paused(kOwned), IsEmpty());
  EXPECT_THAT(state.PauseCommands(), IsEmpty());  // "resume all" leaves nothing
  ASSERT_TRUE(state.Apply(Pause(true, "")));
  ASSERT_TRUE(state.Apply(Pause(false, "t")));
  EXPECT_THAT(state.Paused(kOwned), UnorderedElementsAre(kU0));
  EXPECT_THAT(state.PauseCommands(), ElementsAre("pause all", "resume t"));
}

TEST(ControlStateTest, ResetIsPendingForOwnedPartitionsUntilAnswered) {
  ControlState state;
  ASSERT_TRUE(state.Apply(Reset("r1", {{kT0, 5}, {kT1, 7}, {TopicPartition{"v", 0}, 9}})));
  EXPECT_THAT(Text(state.PendingResets(kOwned)), ElementsAre("r1 t/0@5", "r1 t/1@7"));
  EXPECT_THAT(Text(state.PendingResets({kU0})), IsEmpty());
  state.MarkAnswered("r1", kT0);  // this replica reported it
  ASSERT_TRUE(state.Apply(Result("r1", kT1, "replica-b")));  // another one did
  EXPECT_THAT(state.PendingResets(kOwned), IsEmpty());
  ASSERT_EQ(state.ResultCount("r1"), 1u);
  EXPECT_EQ(state.Results("r1")[0].applied_by, "replica-b");
}

TEST(ControlStateTest, DuplicateCommandsArePendingOnce) {
  ControlState state;
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(state.Apply(Reset("r1", {{kT0, 5}})));
    ASSERT_TRUE(state.Apply(Skip("s1", kT1, 3, kNowMs + 1000)));
    ASSERT_TRUE(state.Apply(Pause(true, "u", {}, "p1", kNowMs + 1000)));
  }
  EXPECT_THAT(Text(state.PendingResets(kOwned)), ElementsAre("r1 t/0@5"));
  EXPECT_THAT(Text(state.PendingSkips(kOwned, kNowMs)), ElementsAre("s1 t/1@3"));
  EXPECT_THAT(Text(state.PendingPauseAcks(kOwned, kNowMs)), ElementsAre("p1 u/0"));
  EXPECT_THAT(state.Paused(kOwned), UnorderedElementsAre(kU0));
  // A duplicated result answers once; both copies are kept as read.
  ASSERT_TRUE(state.Apply(Result("r1", kT0)));
  ASSERT_TRUE(state.Apply(Result("r1", kT0)));
  EXPECT_THAT(state.PendingResets(kOwned), IsEmpty());
  EXPECT_EQ(state.ResultCount("r1"), 2u);
}

TEST(ControlStateTest, AResultReadBeforeItsCommandStillAnswersIt) {
  ControlState state;
  ASSERT_TRUE(state.Apply(Result("r1", kT0)));
  ASSERT_TRUE(state.Apply(Result("s1", kT1)));
  ASSERT_TRUE(state.Apply(Reset("r1", {{kT0, 5}, {kT1, 6}})));
  ASSERT_TRUE(state.Apply(Skip("s1", kT1, 3, kNowMs + 1000)));
  EXPECT_THAT(Text(state.PendingResets(kOwned)), ElementsAre("r1 t/1@6"));
  EXPECT_THAT(state.PendingSkips(kOwned, kNowMs), IsEmpty());
}

TEST(ControlStateTest, ALaterResetWithTheSameIdReplacesItsTargets) {
  ControlState state;
  ASSERT_TRUE(state.Apply(Reset("r1", {{kT0, 5}})));
  ASSERT_TRUE(state.Apply(Reset("r1", {{kT1, 8}})));
  EXPECT_THAT(Text(state.PendingResets(kOwned)), ElementsAre("r1 t/1@8"));
}

TEST(ControlStateTest, SkipsAndAcknowledgementsExpire) {
  ControlState state;
  ASSERT_TRUE(state.Apply(Skip("s1", kT0, 3, kNowMs)));
  ASSERT_TRUE(state.Apply(Pause(true, "t", {1}, "p1", kNowMs)));
  EXPECT_THAT(Text(state.PendingSkips(kOwned, kNowMs)), ElementsAre("s1 t/0@3"));
  EXPECT_THAT(Text(state.PendingPauseAcks(kOwned, kNowMs)), ElementsAre("p1 t/1"));
  EXPECT_THAT(state.PendingSkips(kOwned, kNowMs + 1), IsEmpty());
  EXPECT_THAT(state.PendingPauseAcks(kOwned, kNowMs + 1), IsEmpty());
  // The pause itself does not expire with its acknowledgement window.
  EXPECT_THAT(state.Paused(kOwned), UnorderedElementsAre(kT1));
}

TEST(ControlStateTest, APauseWithoutAnAcknowledgementWindowWantsNone) {
  ControlState state;
  ASSERT_TRUE(state.Apply(Pause(true, "t", {}, "p1", 0)));
  EXPECT_THAT(state.PendingPauseAcks(kOwned, kNowMs), IsEmpty());
}

TEST(ControlStateTest, ARecordOfUnknownKindChangesNothing) {
  ControlState state;
  ASSERT_TRUE(state.Apply(Reset("r1", {{kT0, 5}})));
  ControlLogRecord unknown;
  unknown.set_command_id("r1");
  unknown.set_issued_by("newer-ferry");
  EXPECT_FALSE(state.Apply(unknown));
  EXPECT_THAT(Text(state.PendingResets(kOwned)), ElementsAre("r1 t/0@5"));
  EXPECT_THAT(state.Paused(kOwned), IsEmpty());
  EXPECT_EQ(state.ResultCount("r1"), 0u);
}

TEST(ControlStateTest, GarbageCommandsTouchNoOwnedPartition) {
  ControlState state;
  const TopicPartition bogus{"\xff\xfe not utf-8", -7};
  ASSERT_TRUE(state.Apply(Reset("", {{bogus, -3}})));
  ASSERT_TRUE(state.Apply(Reset("empty", {})));
  ASSERT_TRUE(state.Apply(Skip("s", bogus, -1, INT64_MAX)));
  ASSERT_TRUE(state.Apply(Pause(true, "\xff\xfe not utf-8", {-7})));
  ASSERT_TRUE(state.Apply(Result("never-issued", kT0)));
  EXPECT_THAT(state.PendingResets(kOwned), IsEmpty());
  EXPECT_THAT(state.PendingSkips(kOwned, kNowMs), IsEmpty());
  EXPECT_THAT(state.Paused(kOwned), IsEmpty());
  // Only an owner of the bogus partition would see them.
  EXPECT_THAT(Text(state.PendingResets({bogus})), ElementsAre(" \xff\xfe not utf-8/-7@-3"));
}

// The folded rate limits as "processor: rate/burst".
std::vector<std::string> Limits(const ControlState& state) {
  return testing::RateLimitsText(state.RateLimits());
}

TEST(ControlStateTest, TheLastRateLimitOfAProcessorIsInForceAndClearRemovesIt) {
  ControlState state;
  EXPECT_THAT(Limits(state), IsEmpty());
  ASSERT_TRUE(state.Apply(RateLimitRecord("slow", 200)));
  ASSERT_TRUE(state.Apply(RateLimitRecord("fast", 1000, 50)));
  ASSERT_TRUE(state.Apply(RateLimitRecord("slow", 12.5, 3)));  // replaces, burst too
  EXPECT_THAT(Limits(state), ElementsAre("fast: 1000/50", "slow: 12.5/3"));
  // 0 without clear: the limit is lifted by the operator (kept, not erased).
  ASSERT_TRUE(state.Apply(RateLimitRecord("fast", 0)));
  EXPECT_THAT(Limits(state), ElementsAre("fast: 0/0", "slow: 12.5/3"));
  ASSERT_TRUE(state.Apply(RateLimitRecord("slow", 0, 0, /*clear=*/true)));
  EXPECT_THAT(Limits(state), ElementsAre("fast: 0/0"));
  // Clearing twice, or a processor never set, changes nothing.
  ASSERT_TRUE(state.Apply(RateLimitRecord("slow", 0, 0, true)));
  ASSERT_TRUE(state.Apply(RateLimitRecord("never", 0, 0, true)));
  EXPECT_THAT(Limits(state), ElementsAre("fast: 0/0"));
  // The same record again (a replayed log) folds to the same state.
  ASSERT_TRUE(state.Apply(RateLimitRecord("fast", 0)));
  EXPECT_THAT(Limits(state), ElementsAre("fast: 0/0"));
}

TEST(ControlStateTest, RateLimitsDoNotTouchPausesAndPausesDoNotTouchRateLimits) {
  ControlState state;
  ASSERT_TRUE(state.Apply(RateLimitRecord("slow", 5)));
  ASSERT_TRUE(state.Apply(Pause(true, "")));
  ASSERT_TRUE(state.Apply(Pause(false, "")));  // resume all clears pause_changes_
  EXPECT_THAT(Limits(state), ElementsAre("slow: 5/0"));
  ASSERT_TRUE(state.Apply(Pause(true, "t", {0})));
  ASSERT_TRUE(state.Apply(RateLimitRecord("slow", 0, 0, true)));
  EXPECT_THAT(state.Paused(kOwned), UnorderedElementsAre(kT0));
  EXPECT_THAT(state.PauseCommands(), ElementsAre("pause t/0"));
}

TEST(ControlStateTest, ARateLimitRecordWithImpossibleValuesIsIgnored) {
  // The edge refuses these; a record carrying one anyway must not reach the
  // engine, nor undo the limit in force.
  ControlState state;
  ASSERT_TRUE(state.Apply(RateLimitRecord("slow", 100, 10)));
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  for (const ControlLogRecord& bad :
       {RateLimitRecord("slow", nan), RateLimitRecord("slow", inf),
        RateLimitRecord("slow", -inf), RateLimitRecord("slow", -1),
        RateLimitRecord("slow", 5, -1), RateLimitRecord("", 5), RateLimitRecord("", 0, 0, true)}) {
    EXPECT_TRUE(state.Apply(bad)) << bad.ShortDebugString();
    EXPECT_THAT(Limits(state), ElementsAre("slow: 100/10")) << bad.ShortDebugString();
  }
}

TEST(ControlStateTest, BytesThatAreNoRecordFoldToNothingOrToAKnownKind) {
  // The reader parses before folding; whatever random bytes parse into, the
  // fold must not crash, and say "unknown" exactly when no kind is set.
  uint32_t seed = 12345;
  for (int i = 0; i < 2000; ++i) {
    std::string bytes(1 + i % 64, '\0');
    for (char& c : bytes) {
      seed = seed * 1103515245u + 12345u;
      c = static_cast<char>(seed >> 24);
    }
    ControlLogRecord record;
    if (!record.ParseFromString(bytes)) continue;
    ControlState state;
    const bool known = state.Apply(record);
    EXPECT_EQ(known, record.body_case() != ControlLogRecord::BODY_NOT_SET);
  }
}

}  // namespace
}  // namespace ferry
