// ControlLog against librdkafka's in-process mock cluster: two (or three)
// ControlLog instances on one control topic play the replicas of a group.
// Synchronisation is by WaitRead / WaitForResults / CatchUp (blocking with
// timeouts), never by sleeping.
#include "core/control/control_log.h"

#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>

#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "core/config/config.h"
#include "ferry/v1/control_log.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/mocks/mock_cluster.h"

namespace ferry {
namespace {

using ::ferry::testing::MockCluster;
using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::UnorderedElementsAre;
using v1::internal::CommandResult;
using v1::internal::ControlLogRecord;

// Generous: the test machine is slow and shared; a healthy run takes far less.
constexpr absl::Duration kTimeout = absl::Seconds(60);
constexpr char kControlTopic[] = "ferry.control.test";

const TopicPartition kT0{"t", 0};
const TopicPartition kT1{"t", 1};
const TopicPartition kT2{"t", 2};
const TopicPartition kU0{"u", 0};
const TopicPartition kU3{"u", 3};

ControlLogRecord PauseRecord(bool paused, const std::string& topic,
                             const std::vector<int32_t>& partitions = {}) {
  ControlLogRecord record;
  v1::internal::PauseChange* change = record.mutable_pause();
  change->set_paused(paused);
  change->set_topic(topic);
  for (int32_t partition : partitions) change->add_partitions(partition);
  return record;
}

ControlLogRecord PauseAllRecord(bool paused) {
  ControlLogRecord record;
  record.mutable_pause()->set_paused(paused);
  record.mutable_pause()->set_all(true);
  return record;
}

ControlLogRecord ResetRecord(const std::string& command_id,
                             const std::vector<std::pair<TopicPartition, int64_t>>& targets) {
  ControlLogRecord record;
  record.set_command_id(command_id);
  for (const auto& [tp, offset] : targets) {
    v1::internal::ResetTarget* target = record.mutable_reset()->add_targets();
    target->set_topic(tp.topic);
    target->set_partition(tp.partition);
    target->set_offset(offset);
  }
  return record;
}

ControlLogRecord SkipRecord(const std::string& command_id, const TopicPartition& tp,
                            int64_t offset, absl::Time expires_at) {
  ControlLogRecord record;
  record.set_command_id(command_id);
  v1::internal::SkipCommand* skip = record.mutable_skip();
  skip->set_topic(tp.topic);
  skip->set_partition(tp.partition);
  skip->set_offset(offset);
  skip->set_expires_at_ms(absl::ToUnixMillis(expires_at));
  return record;
}

CommandResult Result(const std::string& command_id, const TopicPartition& tp,
                     const std::string& outcome = "") {
  CommandResult result;
  result.set_command_id(command_id);
  result.set_topic(tp.topic);
  result.set_partition(tp.partition);
  result.set_ok(true);
  result.set_outcome(outcome);
  return result;
}

std::vector<std::string> Describe(const std::vector<ControlLog::PendingReset>& resets) {
  std::vector<std::string> described;
  for (const ControlLog::PendingReset& reset : resets) {
    described.push_back(absl::StrCat(reset.command_id, " ", reset.partition.ToString(), "@",
                                     reset.offset));
  }
  return described;
}

std::vector<std::string> Describe(const std::vector<ControlLog::PendingSkip>& skips) {
  std::vector<std::string> described;
  for (const ControlLog::PendingSkip& skip : skips) {
    described.push_back(absl::StrCat(skip.command_id, " ", skip.partition.ToString(), "@",
                                     skip.offset));
  }
  return described;
}

class ControlLogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(cluster_.ok());
    // The mock has no CreateTopics controller, and Start lists topics first:
    // the control topic must exist before any replica starts.
    ASSERT_EQ(cluster_.CreateTopic(kControlTopic, 1), RD_KAFKA_RESP_ERR_NO_ERROR);
    config_.kafka["bootstrap.servers"] = cluster_.bootstrap();
    config_.control_topic = kControlTopic;
  }

  // A started replica, or null (with the failure recorded).
  std::unique_ptr<ControlLog> StartReplica(const std::string& name) {
    absl::StatusOr<std::unique_ptr<ControlLog>> log = ControlLog::Create(config_, name);
    if (!log.ok()) {
      ADD_FAILURE() << "Create " << name << ": " << log.status();
      return nullptr;
    }
    absl::Status started = (*log)->Start();
    if (!started.ok()) {
      ADD_FAILURE() << "Start " << name << ": " << started;
      return nullptr;
    }
    EXPECT_EQ((*log)->topic(), kControlTopic);
    EXPECT_EQ((*log)->replica(), name);
    return std::move(*log);
  }

  // Appends through `writer` and returns the offset after the record (what
  // WaitRead needs), or -1 with the failure recorded.
  int64_t Append(ControlLog& writer, ControlLogRecord record) {
    absl::StatusOr<int64_t> offset = writer.Append(std::move(record), kTimeout);
    if (!offset.ok()) {
      ADD_FAILURE() << "Append: " << offset.status();
      return -1;
    }
    return *offset + 1;
  }

  MockCluster cluster_;
  Config config_;
};

TEST_F(ControlLogTest, PauseAppendedByOneReplicaIsSeenByAnother) {
  std::unique_ptr<ControlLog> a = StartReplica("replica-a");
  std::unique_ptr<ControlLog> b = StartReplica("replica-b");
  ASSERT_TRUE(a && b);
  const std::vector<TopicPartition> all{kT0, kT1, kT2, kU0};
  EXPECT_THAT(b->Paused(all), IsEmpty());

  const int64_t end = Append(*a, PauseRecord(true, "t", {0, 1}));
  ASSERT_GT(end, 0);
  ASSERT_TRUE(b->WaitRead(end, kTimeout).ok());
  EXPECT_THAT(b->Paused(all), UnorderedElementsAre(kT0, kT1));
  // Only the partitions asked about are answered.
  EXPECT_THAT(b->Paused({kT1, kU0}), ElementsAre(kT1));
  ASSERT_TRUE(a->WaitRead(end, kTimeout).ok());
  EXPECT_THAT(a->Paused(all), UnorderedElementsAre(kT0, kT1));

  // A later resume of one partition overrides the pause for it alone.
  const int64_t resumed = Append(*b, PauseRecord(false, "t", {1}));
  ASSERT_GT(resumed, end);
  ASSERT_TRUE(a->WaitRead(resumed, kTimeout).ok());
  ASSERT_TRUE(b->WaitRead(resumed, kTimeout).ok());
  EXPECT_THAT(a->Paused(all), ElementsAre(kT0));
  EXPECT_THAT(b->Paused(all), ElementsAre(kT0));
  EXPECT_THAT(b->PauseCommands(), ElementsAre("pause t/0,1", "resume t/1"));
  EXPECT_EQ(a->PauseCommands(), b->PauseCommands());
}

TEST_F(ControlLogTest, PauseAllThenResumeOfOneTopicLeavesOtherTopicsPaused) {
  std::unique_ptr<ControlLog> a = StartReplica("replica-a");
  std::unique_ptr<ControlLog> b = StartReplica("replica-b");
  ASSERT_TRUE(a && b);
  const std::vector<TopicPartition> all{kT0, kT1, kU0, kU3};
  ASSERT_GT(Append(*a, PauseRecord(false, "u", {0})), 0);  // overridden by "pause all"
  ASSERT_GT(Append(*a, PauseAllRecord(true)), 0);
  const int64_t end = Append(*a, PauseRecord(false, "t"));
  ASSERT_GT(end, 0);
  ASSERT_TRUE(b->WaitRead(end, kTimeout).ok());
  EXPECT_THAT(b->Paused(all), UnorderedElementsAre(kU0, kU3));
  EXPECT_THAT(b->PauseCommands(), ElementsAre("pause all", "resume t"));

  // "resume all" leaves nothing in force.
  const int64_t resumed = Append(*a, PauseAllRecord(false));
  ASSERT_TRUE(b->WaitRead(resumed, kTimeout).ok());
  EXPECT_THAT(b->Paused(all), IsEmpty());
  EXPECT_THAT(b->PauseCommands(), IsEmpty());
}

TEST_F(ControlLogTest, ResetIsPendingOnOwnersUntilAResultIsReported) {
  std::unique_ptr<ControlLog> a = StartReplica("replica-a");
  std::unique_ptr<ControlLog> b = StartReplica("replica-b");
  ASSERT_TRUE(a && b);
  const std::string command = a->NewCommandId();
  const int64_t end = Append(*a, ResetRecord(command, {{kT0, 5}, {kT1, 7}}));
  ASSERT_GT(end, 0);
  ASSERT_TRUE(b->WaitRead(end, kTimeout).ok());
  ASSERT_TRUE(a->WaitRead(end, kTimeout).ok());

  // Only for partitions the asking replica owns.
  EXPECT_THAT(Describe(b->PendingResets({kT0})), ElementsAre(command + " t/0@5"));
  EXPECT_THAT(Describe(b->PendingResets({kT2, kU0})), IsEmpty());
  EXPECT_THAT(Describe(b->PendingResets({})), IsEmpty());
  EXPECT_THAT(Describe(a->PendingResets({kT0, kT1})),
              UnorderedElementsAre(command + " t/0@5", command + " t/1@7"));

  // B applies t/0 and reports: no longer pending on B at once...
  const uint64_t generation = b->Generation();
  ASSERT_TRUE(b->ReportResult(Result(command, kT0)).ok());
  EXPECT_NE(b->Generation(), generation);
  EXPECT_THAT(Describe(b->PendingResets({kT0, kT1})), ElementsAre(command + " t/1@7"));

  // ...and on A once A has read the result record, which names B.
  std::vector<ControlLog::AppliedResult> results = a->WaitForResults(command, 1, kTimeout);
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].applied_by, "replica-b");
  EXPECT_EQ(results[0].result.command_id(), command);
  EXPECT_EQ(results[0].result.topic(), "t");
  EXPECT_EQ(results[0].result.partition(), 0);
  EXPECT_TRUE(results[0].result.ok());
  EXPECT_THAT(Describe(a->PendingResets({kT0, kT1})), ElementsAre(command + " t/1@7"));

  // B reads its own result back too.
  results = b->WaitForResults(command, 1, kTimeout);
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].applied_by, "replica-b");
}

TEST_F(ControlLogTest, WaitForResultsGivesUpAfterItsTimeout) {
  std::unique_ptr<ControlLog> a = StartReplica("replica-a");
  ASSERT_TRUE(a);
  EXPECT_THAT(a->WaitForResults("no-such-command", 1, absl::Milliseconds(200)), IsEmpty());
}

TEST_F(ControlLogTest, SkipIsPendingForTheOwnerUntilItExpires) {
  std::unique_ptr<ControlLog> a = StartReplica("replica-a");
  std::unique_ptr<ControlLog> b = StartReplica("replica-b");
  ASSERT_TRUE(a && b);
  // ControlLog reads the wall clock for expiry, so the margins are an hour.
  const absl::Time now = absl::Now();
  const std::string expired = a->NewCommandId();
  const std::string live = a->NewCommandId();
  ASSERT_NE(expired, live);
  ASSERT_GT(Append(*a, SkipRecord(expired, kT0, 3, now - absl::Hours(1))), 0);
  const int64_t end = Append(*a, SkipRecord(live, kT0, 4, now + absl::Hours(1)));
  ASSERT_GT(end, 0);
  ASSERT_TRUE(b->WaitRead(end, kTimeout).ok());

  EXPECT_THAT(Describe(b->PendingSkips({kT0, kT1})), ElementsAre(live + " t/0@4"));
  EXPECT_THAT(Describe(b->PendingSkips({kT1})), IsEmpty());
  // Answered: no longer pending.
  ASSERT_TRUE(b->ReportResult(Result(live, kT0, "marked_done")).ok());
  EXPECT_THAT(Describe(b->PendingSkips({kT0})), IsEmpty());
  std::vector<ControlLog::AppliedResult> results = a->WaitForResults(live, 1, kTimeout);
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].result.outcome(), "marked_done");
  EXPECT_EQ(results[0].applied_by, "replica-b");
  ASSERT_TRUE(a->WaitRead(end, kTimeout).ok());
  EXPECT_THAT(Describe(a->PendingSkips({kT0})), IsEmpty());
}

TEST_F(ControlLogTest, AReplicaStartedLaterReplaysTheWholeLog) {
  std::string command;
  {
    std::unique_ptr<ControlLog> a = StartReplica("replica-a");
    std::unique_ptr<ControlLog> b = StartReplica("replica-b");
    ASSERT_TRUE(a && b);
    command = a->NewCommandId();
    ASSERT_GT(Append(*a, PauseAllRecord(true)), 0);
    ASSERT_GT(Append(*a, PauseRecord(false, "u", {3})), 0);
    ASSERT_GT(Append(*a, ResetRecord(command, {{kT0, 5}, {kT1, 7}})), 0);
    ASSERT_TRUE(b->ReportResult(Result(command, kT1)).ok());
    ASSERT_EQ(a->WaitForResults(command, 1, kTimeout).size(), 1u);
    a->Stop();
    b->Stop();
  }
  // Every replica that wrote is gone; a new one finds the same state.
  std::unique_ptr<ControlLog> c = StartReplica("replica-c");
  ASSERT_TRUE(c);
  ASSERT_TRUE(c->CatchUp(kTimeout).ok());
  EXPECT_THAT(c->Paused({kT0, kT1, kU0, kU3}), UnorderedElementsAre(kT0, kT1, kU0));
  EXPECT_THAT(c->PauseCommands(), ElementsAre("pause all", "resume u/3"));
  EXPECT_THAT(Describe(c->PendingResets({kT0, kT1})), ElementsAre(command + " t/0@5"));
  std::vector<ControlLog::AppliedResult> results = c->WaitForResults(command, 1, kTimeout);
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].applied_by, "replica-b");
}

TEST_F(ControlLogTest, CatchUpReadsToTheEndAndGenerationMovesWithNewRecords) {
  std::unique_ptr<ControlLog> a = StartReplica("replica-a");
  ASSERT_TRUE(a);
  ASSERT_TRUE(a->CatchUp(kTimeout).ok());  // an empty log
  ASSERT_GT(Append(*a, PauseRecord(true, "t", {0})), 0);
  ASSERT_GT(Append(*a, PauseRecord(true, "t", {1})), 0);
  const int64_t end = Append(*a, PauseRecord(true, "u"));
  ASSERT_GT(end, 0);

  std::unique_ptr<ControlLog> b = StartReplica("replica-b");
  ASSERT_TRUE(b);
  ASSERT_TRUE(b->CatchUp(kTimeout).ok());
  // CatchUp returned, so everything written before it has been applied.
  EXPECT_THAT(b->Paused({kT0, kT1, kT2, kU0}), UnorderedElementsAre(kT0, kT1, kU0));
  const uint64_t generation = b->Generation();
  // Nothing new: the generation stands.
  ASSERT_TRUE(b->CatchUp(kTimeout).ok());
  EXPECT_EQ(b->Generation(), generation);

  const int64_t resumed = Append(*a, PauseRecord(false, "t", {0}));
  ASSERT_GT(resumed, end);
  ASSERT_TRUE(b->WaitRead(resumed, kTimeout).ok());
  EXPECT_NE(b->Generation(), generation);
  EXPECT_THAT(b->Paused({kT0, kT1, kT2, kU0}), UnorderedElementsAre(kT1, kU0));
}

TEST_F(ControlLogTest, WaitReadPastTheEndTimesOut) {
  std::unique_ptr<ControlLog> a = StartReplica("replica-a");
  ASSERT_TRUE(a);
  const int64_t end = Append(*a, PauseRecord(true, "t"));
  ASSERT_GT(end, 0);
  ASSERT_TRUE(a->WaitRead(end, kTimeout).ok());
  const absl::Status status = a->WaitRead(end + 5, absl::Milliseconds(200));
  EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded) << status;
}

}  // namespace
}  // namespace ferry
