// CommandApplier against librdkafka's mock cluster: a ControlLog on a control
// topic, an Engine, and a KafkaConsumer that owns t/0 and t/1 by a manual
// assignment (no group rebalance). Synchronisation is by CatchUp and
// WaitForResults (blocking with deadlines), never by sleeping.
#include "core/kafka/command_applier.h"

#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafkacpp.h>

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "core/common/clock.h"
#include "core/config/config.h"
#include "core/control/control_log.h"
#include "core/engine/engine.h"
#include "ferry/v1/control_log.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/mocks/engine_fixtures.h"
#include "tests/mocks/mock_cluster.h"

namespace ferry {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::UnorderedElementsAre;
using v1::internal::ControlLogRecord;

constexpr absl::Duration kTimeout = absl::Seconds(60);
constexpr char kControlTopic[] = "ferry.control.applier";
const TopicPartition kT0{"t", 0};
const TopicPartition kT1{"t", 1};
const TopicPartition kT2{"t", 2};

class CommandApplierTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(cluster_.ok());
    ASSERT_EQ(cluster_.CreateTopic(kControlTopic, 1), RD_KAFKA_RESP_ERR_NO_ERROR);
    ASSERT_EQ(cluster_.CreateTopic("t", 3), RD_KAFKA_RESP_ERR_NO_ERROR);
    config_.kafka["bootstrap.servers"] = cluster_.bootstrap();
    config_.control_topic = kControlTopic;
    absl::StatusOr<std::unique_ptr<ControlLog>> control = ControlLog::Create(config_, "here");
    ASSERT_TRUE(control.ok()) << control.status();
    control_ = std::move(*control);
    ASSERT_TRUE(control_->Start().ok());
    std::unique_ptr<RdKafka::Conf> conf(RdKafka::Conf::create(RdKafka::Conf::CONF_GLOBAL));
    std::string error;
    ASSERT_EQ(conf->set("bootstrap.servers", cluster_.bootstrap(), error), RdKafka::Conf::CONF_OK);
    ASSERT_EQ(conf->set("group.id", "applier", error), RdKafka::Conf::CONF_OK);
    consumer_.reset(RdKafka::KafkaConsumer::create(conf.get(), error));
    ASSERT_NE(consumer_, nullptr) << error;
    engine_.OnAssigned(owned_);
    applier_.SetControlLog(control_.get());
  }
  void TearDown() override {
    if (consumer_ != nullptr) consumer_->close();
  }

  void Append(ControlLogRecord record) {
    absl::StatusOr<int64_t> offset = control_->Append(std::move(record), kTimeout);
    ASSERT_TRUE(offset.ok()) << offset.status();
    ASSERT_TRUE(control_->WaitRead(*offset + 1, kTimeout).ok());
  }

  bool EnginePaused(const TopicPartition& tp) const {
    for (const PartitionSnapshot& p : engine_.Snapshot().partitions) {
      if (p.partition == tp) return p.paused;
    }
    return false;
  }

  testing::MockCluster cluster_;
  Config config_ = testing::EngineTestConfig();
  Engine engine_{config_, RealClock::Get()};
  std::unique_ptr<ControlLog> control_;
  std::unique_ptr<RdKafka::KafkaConsumer> consumer_;
  CommandApplier applier_{&engine_, nullptr};
  const std::vector<TopicPartition> owned_ = {kT0, kT1};
};

TEST(CommandApplierWithoutControlLogTest, DoesNothing) {
  Config config = testing::EngineTestConfig();
  Engine engine(config, RealClock::Get());
  CommandApplier applier(&engine, nullptr);
  EXPECT_FALSE(applier.enabled());
  EXPECT_EQ(applier.Generation(), 0u);
  EXPECT_THAT(applier.OperatorPaused({kT0}), IsEmpty());
  std::vector<RdKafka::TopicPartition*> none;
  EXPECT_THAT(applier.SetStartOffsets(none, absl::Seconds(1)), IsEmpty());
}

TEST_F(CommandApplierTest, OperatorPausesOfOwnedPartitionsReachTheEngineAndAreAcknowledged) {
  ControlLogRecord pause;
  pause.set_command_id("p1");
  pause.mutable_pause()->set_paused(true);
  pause.mutable_pause()->set_topic("t");
  pause.mutable_pause()->add_partitions(0);
  pause.mutable_pause()->add_partitions(2);  // not owned here
  pause.mutable_pause()->set_ack_until_ms(absl::ToUnixMillis(absl::Now() + kTimeout));
  ASSERT_NO_FATAL_FAILURE(Append(pause));
  EXPECT_NE(applier_.Generation(), 0u);
  EXPECT_THAT(applier_.OperatorPaused(owned_), UnorderedElementsAre(kT0));
  EXPECT_TRUE(EnginePaused(kT0));
  EXPECT_FALSE(EnginePaused(kT1));
  applier_.Apply(*consumer_, owned_);
  std::vector<ControlLog::AppliedResult> acks = control_->WaitForResults("p1", 1, kTimeout);
  ASSERT_EQ(acks.size(), 1u);
  EXPECT_TRUE(acks[0].result.ok());
  EXPECT_EQ(acks[0].result.partition(), 0);
  // Acknowledged once: applying again reports nothing new.
  applier_.Apply(*consumer_, owned_);
  EXPECT_THAT(control_->PendingPauseAcks(owned_), IsEmpty());
  // A revoked partition's operator pause is forgotten (the engine drops the
  // partition itself), and in force again when it comes back.
  applier_.Forget({kT0});
  EXPECT_THAT(applier_.OperatorPaused({kT1}), IsEmpty());
  engine_.OnRevoked({kT0});
  engine_.OnAssigned({kT0});
  EXPECT_THAT(applier_.OperatorPaused(owned_), UnorderedElementsAre(kT0));
  EXPECT_TRUE(EnginePaused(kT0));
}

// "processor: rate/burst" of what the engine was last told.
std::vector<std::string> Told(const CommandApplier& applier) {
  return testing::RateLimitsText(applier.rate_limits());
}

TEST_F(CommandApplierTest, OperatorRateLimitsReachTheEngineWhateverTheAssignment) {
  // (The engine's own handling of SetRateLimits is the engine's tests'; here
  // the applier tells it the folded set, whole, on every change.)
  applier_.Apply(*consumer_, owned_);
  EXPECT_THAT(Told(applier_), IsEmpty());
  ASSERT_NO_FATAL_FAILURE(Append(testing::RateLimitRecord("p", 200, 20, false)));
  applier_.Apply(*consumer_, {});  // nothing owned: every replica limits
  EXPECT_THAT(Told(applier_), ElementsAre("p: 200/20"));
  ASSERT_NO_FATAL_FAILURE(Append(testing::RateLimitRecord("q", 0, 0, false)));
  applier_.Apply(*consumer_, owned_);
  EXPECT_THAT(Told(applier_), ElementsAre("p: 200/20", "q: 0/0"));
  ASSERT_NO_FATAL_FAILURE(Append(testing::RateLimitRecord("p", 0, 0, true)));
  applier_.Apply(*consumer_, owned_);
  EXPECT_THAT(Told(applier_), ElementsAre("q: 0/0"));
}

TEST_F(CommandApplierTest, ASkipOfAnEventNotHereIsReportedAsFailedNotDropped) {
  ControlLogRecord skip;
  skip.set_command_id("s1");
  skip.mutable_skip()->set_topic("t");
  skip.mutable_skip()->set_partition(1);
  skip.mutable_skip()->set_offset(42);
  skip.mutable_skip()->set_expires_at_ms(absl::ToUnixMillis(absl::Now() + kTimeout));
  ASSERT_NO_FATAL_FAILURE(Append(skip));
  applier_.Apply(*consumer_, owned_);
  std::vector<ControlLog::AppliedResult> results = control_->WaitForResults("s1", 1, kTimeout);
  ASSERT_EQ(results.size(), 1u);
  EXPECT_FALSE(results[0].result.ok());
  EXPECT_FALSE(results[0].result.error().empty());
  EXPECT_THAT(control_->PendingSkips(owned_), IsEmpty());
}

TEST_F(CommandApplierTest, APendingResetBecomesTheStartOffsetOfANewlyAssignedPartition) {
  ControlLogRecord reset;
  reset.set_command_id("r1");
  v1::internal::ResetTarget* target = reset.mutable_reset()->add_targets();
  target->set_topic("t");
  target->set_partition(2);
  target->set_offset(0);
  ASSERT_NO_FATAL_FAILURE(Append(reset));
  std::unique_ptr<RdKafka::TopicPartition> t1(RdKafka::TopicPartition::create("t", 1));
  std::unique_ptr<RdKafka::TopicPartition> t2(RdKafka::TopicPartition::create("t", 2));
  std::vector<RdKafka::TopicPartition*> partitions = {t1.get(), t2.get()};
  const std::vector<ControlLog::PendingReset> resets =
      applier_.SetStartOffsets(partitions, kTimeout);
  ASSERT_EQ(resets.size(), 1u);
  EXPECT_EQ(resets[0].partition, kT2);
  EXPECT_EQ(t2->offset(), 0);
  EXPECT_EQ(t1->offset(), RdKafka::Topic::OFFSET_INVALID);  // untouched
  ASSERT_EQ(consumer_->assign(partitions), RdKafka::ERR_NO_ERROR);
  applier_.CommitStartResets(*consumer_, resets);
  std::vector<ControlLog::AppliedResult> results = control_->WaitForResults("r1", 1, kTimeout);
  ASSERT_EQ(results.size(), 1u);
  EXPECT_TRUE(results[0].result.ok()) << results[0].result.error();
  EXPECT_THAT(control_->PendingResets({kT2}), IsEmpty());
}

}  // namespace
}  // namespace ferry
