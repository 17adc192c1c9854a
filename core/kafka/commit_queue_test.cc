#include "core/kafka/commit_queue.h"

#include <librdkafka/rdkafka_mock.h>
#include <librdkafka/rdkafkacpp.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "tests/mocks/mock_cluster.h"

namespace ferry {
namespace {

constexpr char kTopic[] = "commits";
// Kafka protocol API key (rdkafka_protocol.h is not installed).
constexpr int16_t kOffsetCommit = 8;

class CommitQueueTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(cluster_.ok());
    ASSERT_EQ(cluster_.CreateTopic(kTopic, 2), RD_KAFKA_RESP_ERR_NO_ERROR);
    std::unique_ptr<RdKafka::Conf> conf(RdKafka::Conf::create(RdKafka::Conf::CONF_GLOBAL));
    std::string error;
    ASSERT_EQ(conf->set("bootstrap.servers", cluster_.bootstrap(), error), RdKafka::Conf::CONF_OK);
    ASSERT_EQ(conf->set("group.id", "commit-queue-test", error), RdKafka::Conf::CONF_OK);
    ASSERT_EQ(conf->set("enable.auto.commit", "false", error), RdKafka::Conf::CONF_OK);
    consumer_.reset(RdKafka::KafkaConsumer::create(conf.get(), error));
    ASSERT_NE(consumer_, nullptr) << error;
    queue_ = std::make_unique<CommitQueue>(consumer_->c_ptr());
  }
  void TearDown() override {
    queue_.reset();
    if (consumer_ != nullptr) consumer_->close();
  }

  // Serves the queue until `result` is set or `timeout` passes.
  void ServeUntil(const std::optional<absl::Status>& result, absl::Duration timeout) {
    const absl::Time deadline = absl::Now() + timeout;
    while (!result.has_value() && absl::Now() < deadline) queue_->Serve(absl::Milliseconds(50));
  }

  int64_t Committed(int32_t partition) {
    std::vector<RdKafka::TopicPartition*> list{RdKafka::TopicPartition::create(kTopic, partition)};
    const RdKafka::ErrorCode err = consumer_->committed(list, 10000);
    const int64_t offset = err == RdKafka::ERR_NO_ERROR ? list[0]->offset() : -2;
    RdKafka::TopicPartition::destroy(list);
    return offset;
  }

  testing::MockCluster cluster_;
  std::unique_ptr<RdKafka::KafkaConsumer> consumer_;
  std::unique_ptr<CommitQueue> queue_;
};

TEST_F(CommitQueueTest, SendReturnsBeforeASlowCoordinatorAnswers) {
  // Every answer of the (only) broker takes 2 s: a blocking commit would
  // hold its caller that long.
  rd_kafka_mock_broker_set_rtt(cluster_.get(), 1, 2000);
  std::optional<absl::Status> result;
  const absl::Time start = absl::Now();
  queue_->Send({{{kTopic, 0}, 42, 1}, {{kTopic, 1}, 7, 1}},
               [&result](const absl::Status& status) { result = status; });
  EXPECT_LT(absl::Now() - start, absl::Milliseconds(500));
  EXPECT_FALSE(result.has_value());
  EXPECT_EQ(queue_->outstanding(), 1);
  queue_->Serve();  // answers nothing yet, returns at once
  EXPECT_FALSE(result.has_value());

  ServeUntil(result, absl::Seconds(30));
  ASSERT_TRUE(result.has_value());
  EXPECT_TRUE(result->ok()) << *result;
  EXPECT_EQ(queue_->outstanding(), 0);
  rd_kafka_mock_broker_set_rtt(cluster_.get(), 1, 0);
  EXPECT_EQ(Committed(0), 42);
  EXPECT_EQ(Committed(1), 7);
}

TEST_F(CommitQueueTest, RefusedCommitIsAnError) {
  // The coordinator fences the commit (a member of an old generation).
  rd_kafka_mock_push_request_errors(cluster_.get(), kOffsetCommit, 1,
                                    RD_KAFKA_RESP_ERR_ILLEGAL_GENERATION);
  std::optional<absl::Status> result;
  queue_->Send({{{kTopic, 0}, 5, 1}}, [&result](const absl::Status& status) { result = status; });
  ServeUntil(result, absl::Seconds(30));
  ASSERT_TRUE(result.has_value());
  EXPECT_FALSE(result->ok());
  EXPECT_NE(Committed(0), 5);
}

TEST_F(CommitQueueTest, FailAllAnswersOutstandingCommitsAndIgnoresLateAnswers) {
  rd_kafka_mock_broker_set_rtt(cluster_.get(), 1, 500);
  int calls = 0;
  absl::Status last;
  queue_->Send({{{kTopic, 0}, 3, 1}}, [&](const absl::Status& status) {
    ++calls;
    last = status;
  });
  queue_->FailAll(absl::CancelledError("stopping"));
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(last.code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(queue_->outstanding(), 0);
  // The late answer comes and is dropped: no second call. (Serve returns at
  // once with nothing outstanding, so poll the queue directly for a while.)
  const absl::Time deadline = absl::Now() + absl::Seconds(2);
  while (absl::Now() < deadline) queue_->Serve(absl::Milliseconds(50));
  EXPECT_EQ(calls, 1);
}

}  // namespace
}  // namespace ferry
