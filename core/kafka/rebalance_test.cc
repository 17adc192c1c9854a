// Rebalancer as the rebalance callback of a real librdkafka consumer on the
// mock cluster: what the engine, the fetch state and the hooks see as the
// group assigns and revokes. Waits are polls of the consumer with deadlines.
#include "core/kafka/rebalance.h"

#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafkacpp.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "core/common/clock.h"
#include "core/config/config.h"
#include "core/engine/engine.h"
#include "core/kafka/command_applier.h"
#include "core/kafka/flow_control.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/mocks/engine_fixtures.h"
#include "tests/mocks/mock_cluster.h"

namespace ferry {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::UnorderedElementsAre;

constexpr absl::Duration kTimeout = absl::Seconds(60);
const TopicPartition kT0{"t", 0};
const TopicPartition kT1{"t", 1};

class RebalanceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(cluster_.ok());
    ASSERT_EQ(cluster_.CreateTopic("t", 2), RD_KAFKA_RESP_ERR_NO_ERROR);
    std::unique_ptr<RdKafka::Conf> conf(RdKafka::Conf::create(RdKafka::Conf::CONF_GLOBAL));
    std::string error;
    ASSERT_EQ(conf->set("bootstrap.servers", cluster_.bootstrap(), error), RdKafka::Conf::CONF_OK);
    ASSERT_EQ(conf->set("group.id", "rebalance", error), RdKafka::Conf::CONF_OK);
    ASSERT_EQ(conf->set("enable.auto.commit", "false", error), RdKafka::Conf::CONF_OK);
    ASSERT_EQ(conf->set("rebalance_cb", &rebalancer_, error), RdKafka::Conf::CONF_OK);
    consumer_.reset(RdKafka::KafkaConsumer::create(conf.get(), error));
    ASSERT_NE(consumer_, nullptr) << error;
  }
  void TearDown() override {
    if (consumer_ != nullptr && !closed_) consumer_->close();
  }

  // Polls (which runs the callbacks) until `done` or the deadline.
  template <typename Done>
  bool PollUntil(Done done) {
    const absl::Time deadline = absl::Now() + kTimeout;
    while (!done() && absl::Now() < deadline) {
      std::unique_ptr<RdKafka::Message> message(consumer_->consume(50));
    }
    return done();
  }

  testing::MockCluster cluster_;
  Config config_ = testing::EngineTestConfig();
  Engine engine_{config_, RealClock::Get()};
  bool over_high_ = false;
  FlowControl flow_{FlowControl::Budgets{[this] { return over_high_; }, [] { return true; }},
                    nullptr};
  CommandApplier commands_{&engine_, nullptr};
  std::vector<std::string> hooks_;
  Rebalancer rebalancer_{&engine_, nullptr, &flow_, &commands_, absl::Seconds(1),
                         Rebalancer::Hooks{[this](bool lost) {
                                             hooks_.push_back(lost ? "before lost" : "before");
                                           },
                                           [this] { hooks_.push_back("refresh"); }}};
  std::unique_ptr<RdKafka::KafkaConsumer> consumer_;
  bool closed_ = false;
};

std::vector<TopicPartition> EnginePartitions(const Engine& engine) {
  std::vector<TopicPartition> partitions;
  for (const PartitionSnapshot& p : engine.Snapshot().partitions) partitions.push_back(p.partition);
  return partitions;
}

TEST_F(RebalanceTest, FollowsAssignAndRevokeAndSettlesTheOldAssignmentFirst) {
  ASSERT_EQ(consumer_->subscribe({"t"}), RdKafka::ERR_NO_ERROR);
  ASSERT_TRUE(PollUntil([this] { return rebalancer_.AssignmentCopy().size() == 2; }))
      << "never assigned";
  EXPECT_THAT(rebalancer_.assignment(), UnorderedElementsAre(kT0, kT1));
  EXPECT_THAT(EnginePartitions(engine_), UnorderedElementsAre(kT0, kT1));
  // Without a control log there are no commands to refresh.
  EXPECT_THAT(hooks_, ElementsAre("before"));
  std::vector<RdKafka::TopicPartition*> assigned;
  ASSERT_EQ(consumer_->assignment(assigned), RdKafka::ERR_NO_ERROR);
  EXPECT_EQ(assigned.size(), 2u);
  RdKafka::TopicPartition::destroy(assigned);

  ASSERT_EQ(consumer_->close(), RdKafka::ERR_NO_ERROR);  // revokes through the callback
  closed_ = true;
  EXPECT_THAT(rebalancer_.AssignmentCopy(), IsEmpty());
  EXPECT_THAT(EnginePartitions(engine_), IsEmpty());
  EXPECT_THAT(hooks_, ElementsAre("before", "before"));
}

}  // namespace
}  // namespace ferry
