#include "core/engine/committer.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/mocks/engine_fixtures.h"

namespace ferry::testing {
namespace {

// Records commits; fails while `fail` is set.
class RecordingCommitter final : public OffsetCommitter {
 public:
  absl::Status Commit(const std::vector<CommitPosition>& positions) override {
    if (fail) return absl::UnavailableError("broker down");
    commits.push_back(positions);
    return absl::OkStatus();
  }
  bool fail = false;
  std::vector<std::vector<CommitPosition>> commits;
};

class CommitterTest : public ::testing::Test, public EngineHarness {
 protected:
  CommitterTest()
      : EngineHarness(OneProcessorConfig(), TwoPartitions(), DeadLetters::kNone) {}
  void SubmitAndAck(int32_t partition, int64_t offset) {
    engine_->Submit(MakeEvent(partition, offset, "k" + std::to_string(partition), ""), 1);
    AckAll(*engine_, stream_id_, stream_);
  }

  FakeWorkerStream stream_{"s"};
  const int64_t stream_id_ = Connect(*engine_, stream_, 100);
  RecordingCommitter kafka_;
  Committer committer_{engine_.get(), &kafka_, absl::Hours(1)};
};

TEST_F(CommitterTest, CommitsOnlyPartitionsThatAdvanced) {
  EXPECT_TRUE(committer_.CommitNow().ok());
  EXPECT_TRUE(kafka_.commits.empty());  // nothing finished yet
  SubmitAndAck(0, 10);
  ASSERT_TRUE(committer_.CommitNow().ok());
  ASSERT_EQ(kafka_.commits.size(), 1u);
  ASSERT_EQ(kafka_.commits[0].size(), 1u);
  EXPECT_EQ(kafka_.commits[0][0].partition.partition, 0);
  EXPECT_EQ(kafka_.commits[0][0].offset, 11);
  ASSERT_TRUE(committer_.CommitNow().ok());
  EXPECT_EQ(kafka_.commits.size(), 1u);  // unchanged: no second commit
  SubmitAndAck(1, 3);
  ASSERT_TRUE(committer_.CommitNow().ok());
  ASSERT_EQ(kafka_.commits.size(), 2u);
  ASSERT_EQ(kafka_.commits[1].size(), 1u);
  EXPECT_EQ(kafka_.commits[1][0].partition.partition, 1);
}

TEST_F(CommitterTest, FailedCommitIsRetried) {
  SubmitAndAck(0, 0);
  kafka_.fail = true;
  EXPECT_FALSE(committer_.CommitNow().ok());
  kafka_.fail = false;
  ASSERT_TRUE(committer_.CommitNow().ok());
  ASSERT_EQ(kafka_.commits.size(), 1u);
  EXPECT_EQ(kafka_.commits[0][0].offset, 1);
}

TEST_F(CommitterTest, StopMakesAFinalCommit) {
  committer_.Start();
  SubmitAndAck(0, 41);
  committer_.Stop();
  committer_.Stop();  // idempotent
  ASSERT_EQ(kafka_.commits.size(), 1u);
  EXPECT_EQ(kafka_.commits[0][0].offset, 42);
}

// Commits from the committer's own thread; thread-safe.
class SignallingCommitter final : public OffsetCommitter {
 public:
  absl::Status Commit(const std::vector<CommitPosition>&) override {
    absl::MutexLock lock(&mu_);
    ++commits_;
    return absl::OkStatus();
  }
  bool WaitForCommit() {
    absl::MutexLock lock(&mu_);
    auto committed = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return commits_ > 0; };
    return mu_.AwaitWithTimeout(absl::Condition(&committed), absl::Seconds(30));
  }

 private:
  absl::Mutex mu_;
  int commits_ ABSL_GUARDED_BY(mu_) = 0;
};

// The engine's timers are EngineTimer's job: a commit round leaves a passed
// deadline alone.
TEST_F(CommitterTest, CommitsWithoutRunningTheEnginesTimers) {
  SubmitAndAck(1, 5);
  engine_->Submit(MakeEvent(0, 0, "k0", ""), 1);  // at the worker, unanswered
  clock_.Advance(absl::Hours(24));               // long past its deadline
  SignallingCommitter kafka;
  Committer committer(engine_.get(), &kafka, absl::Milliseconds(1));
  committer.Start();
  ASSERT_TRUE(kafka.WaitForCommit());
  committer.Stop();
  EXPECT_EQ(engine_->Snapshot().counters.timed_out, 0);
}

}  // namespace
}  // namespace ferry::testing
