// KafkaAdmin against librdkafka's in-process mock cluster.
#include "core/kafka/admin.h"

#include <librdkafka/rdkafka.h>

#include <map>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/mocks/mock_cluster.h"

namespace ferry {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Generous: the test machine is slow and shared.
constexpr absl::Duration kTimeout = absl::Seconds(30);

class KafkaAdminTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(cluster_.ok());
    absl::StatusOr<std::unique_ptr<KafkaAdmin>> admin =
        KafkaAdmin::Create({{"bootstrap.servers", cluster_.bootstrap()}}, "test");
    ASSERT_TRUE(admin.ok()) << admin.status();
    admin_ = std::move(*admin);
  }

  testing::MockCluster cluster_;
  std::unique_ptr<KafkaAdmin> admin_;
};

TEST_F(KafkaAdminTest, DescribesATopicWithItsPartitionsAndLeaders) {
  ASSERT_EQ(cluster_.CreateTopic("t", 3), RD_KAFKA_RESP_ERR_NO_ERROR);
  absl::StatusOr<TopicDescription> topic = admin_->DescribeTopic("t", kTimeout);
  ASSERT_TRUE(topic.ok()) << topic.status();
  EXPECT_TRUE(topic->status.ok()) << topic->status;
  EXPECT_THAT(topic->partitions, ElementsAre(0, 1, 2));
  EXPECT_TRUE(topic->all_led);
  absl::StatusOr<int> brokers = admin_->BrokerCount(kTimeout);
  ASSERT_TRUE(brokers.ok()) << brokers.status();
  EXPECT_EQ(*brokers, 1);
}

TEST_F(KafkaAdminTest, DescribingAMissingTopicIsNotFoundAndCreatesNothing) {
  for (int i = 0; i < 2; ++i) {
    absl::StatusOr<TopicDescription> topic = admin_->DescribeTopic("missing", kTimeout);
    EXPECT_TRUE(absl::IsNotFound(topic.status())) << topic.status();
  }
}

TEST_F(KafkaAdminTest, CreatingAnExistingTopicIsAlreadyExists) {
  ASSERT_EQ(cluster_.CreateTopic("t", 2), RD_KAFKA_RESP_ERR_NO_ERROR);
  absl::Status created = admin_->CreateTopicAndWait({"t", 2, 1, {}}, kTimeout);
  EXPECT_TRUE(absl::IsAlreadyExists(created)) << created;
  EXPECT_THAT(created.message(), HasSubstr("2 partitions"));
}

TEST_F(KafkaAdminTest, RefusesATopicWithoutPartitionsBeforeAskingKafka) {
  absl::Status created = admin_->CreateTopic({"t", 0, 1, {}}, kTimeout);
  EXPECT_TRUE(absl::IsInvalidArgument(created)) << created;
}

TEST_F(KafkaAdminTest, RefusesATopicWithoutANameBeforeAskingKafka) {
  absl::Status created = admin_->CreateTopic({"", 1, 1, {}}, kTimeout);
  EXPECT_TRUE(absl::IsInvalidArgument(created)) << created;
}

TEST_F(KafkaAdminTest, AnUnknownClientPropertyIsAnInvalidArgumentNamingIt) {
  absl::StatusOr<std::unique_ptr<KafkaAdmin>> admin =
      KafkaAdmin::Create({{"bootstrap.servers", cluster_.bootstrap()}, {"no.such.thing", "1"}},
                         "control topic");
  ASSERT_TRUE(absl::IsInvalidArgument(admin.status())) << admin.status();
  EXPECT_THAT(admin.status().message(), HasSubstr("kafka.no.such.thing (control topic admin"));
}

TEST_F(KafkaAdminTest, ConsumerOnlyPropertiesAreLeftOut) {
  absl::StatusOr<std::unique_ptr<KafkaAdmin>> admin = KafkaAdmin::Create(
      {{"bootstrap.servers", cluster_.bootstrap()}, {"group.id", "g"}, {"auto.offset.reset", "x"}},
      "test");
  EXPECT_TRUE(admin.ok()) << admin.status();
}

TEST_F(KafkaAdminTest, WatermarksAndOffsetsForTimeOfAnEmptyPartition) {
  ASSERT_EQ(cluster_.CreateTopic("t", 2), RD_KAFKA_RESP_ERR_NO_ERROR);
  absl::StatusOr<std::pair<int64_t, int64_t>> marks = admin_->Watermarks("t", 1, kTimeout);
  ASSERT_TRUE(marks.ok()) << marks.status();
  EXPECT_EQ(marks->first, 0);
  EXPECT_EQ(marks->second, 0);
  absl::StatusOr<std::map<int32_t, int64_t>> offsets =
      admin_->OffsetsForTimestamp("t", {0, 1}, /*timestamp_ms=*/0, kTimeout);
  ASSERT_TRUE(offsets.ok()) << offsets.status();
  EXPECT_EQ(offsets->size(), 2u);
  EXPECT_EQ(offsets->at(0), -1);  // no record that late
  EXPECT_EQ(offsets->at(1), -1);
}

TEST_F(KafkaAdminTest, WatermarksOfAMissingPartitionAreAnError) {
  ASSERT_EQ(cluster_.CreateTopic("t", 1), RD_KAFKA_RESP_ERR_NO_ERROR);
  absl::StatusOr<std::pair<int64_t, int64_t>> marks =
      admin_->Watermarks("t", 7, absl::Seconds(5));
  EXPECT_FALSE(marks.ok());
}

// The mock cluster names a controller that is none of its brokers, so a
// CreateTopics cannot be answered: the helper says so (the control log falls
// back to auto-creation on it) and a create gives up within its timeout with
// a clear error instead of stalling. Creation on a real broker:
// tests/kafka (kafka_tool create, control_test).
TEST_F(KafkaAdminTest, WithoutAControllerCreateGivesUpWithinItsTimeout) {
  absl::StatusOr<bool> controller = admin_->ControllerIsABroker(kTimeout);
  ASSERT_TRUE(controller.ok()) << controller.status();
  EXPECT_FALSE(*controller);
  const absl::Time start = absl::Now();
  absl::Status created =
      admin_->CreateTopicAndWait({"fresh", 3, 1, {{"retention.ms", "-1"}}}, absl::Seconds(2));
  EXPECT_TRUE(absl::IsDeadlineExceeded(created)) << created;
  EXPECT_THAT(created.message(), HasSubstr("fresh"));
  EXPECT_LT(absl::Now() - start, absl::Seconds(20));
  // A second attempt is answered by itself, not by the first one's late answer.
  created = admin_->CreateTopic({"fresh", 3, 1, {}}, absl::Seconds(1));
  EXPECT_TRUE(absl::IsDeadlineExceeded(created)) << created;
  EXPECT_TRUE(absl::IsNotFound(admin_->DescribeTopic("fresh", kTimeout).status()));
}

}  // namespace
}  // namespace ferry
