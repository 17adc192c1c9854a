// KafkaDeadLetterWriter against librdkafka's in-process mock cluster: a letter
// too big for the topic (refused by produce() itself, or by the broker) is
// written without its payload, then also without key and headers, instead of
// failing forever; every letter carries ferry.processor.
#include "core/kafka/dead_letter_writer.h"

#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>
#include <librdkafka/rdkafkacpp.h>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/mocks/mock_cluster.h"

namespace ferry {
namespace {

using ::ferry::testing::MockCluster;
using ::testing::HasSubstr;

constexpr int16_t kProduceApiKey = 0;  // Kafka's ProduceRequest

struct Record {
  std::optional<std::string> key;
  std::string value;
  std::multimap<std::string, std::string> headers;
  std::string Header(const std::string& name) const {
    auto it = headers.find(name);
    return it == headers.end() ? "<missing>" : it->second;
  }
};

// The first `count` records of partition 0 of `topic`.
std::vector<Record> ReadRecords(const std::string& bootstrap, const std::string& topic,
                                size_t count) {
  std::string error;
  std::unique_ptr<RdKafka::Conf> conf(RdKafka::Conf::create(RdKafka::Conf::CONF_GLOBAL));
  conf->set("bootstrap.servers", bootstrap, error);
  conf->set("group.id", "reader", error);
  conf->set("enable.auto.commit", "false", error);
  std::unique_ptr<RdKafka::KafkaConsumer> consumer(RdKafka::KafkaConsumer::create(conf.get(), error));
  EXPECT_NE(consumer, nullptr) << error;
  std::vector<Record> records;
  if (consumer == nullptr) return records;
  std::unique_ptr<RdKafka::TopicPartition> tp(
      RdKafka::TopicPartition::create(topic, 0, RdKafka::Topic::OFFSET_BEGINNING));
  consumer->assign({tp.get()});
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (records.size() < count && absl::Now() < deadline) {
    std::unique_ptr<RdKafka::Message> message(consumer->consume(100));
    if (message->err() != RdKafka::ERR_NO_ERROR) continue;
    Record record;
    if (message->key() != nullptr) record.key = *message->key();
    record.value.assign(static_cast<const char*>(message->payload()), message->len());
    if (RdKafka::Headers* headers = message->headers()) {
      for (const RdKafka::Headers::Header& header : headers->get_all()) {
        record.headers.emplace(header.key(),
                               std::string(static_cast<const char*>(header.value()),
                                           header.value_size()));
      }
    }
    records.push_back(std::move(record));
  }
  consumer->close();
  EXPECT_EQ(records.size(), count) << "records read from " << topic;
  return records;
}

class DeadLetterWriterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(cluster_.CreateTopic("dlq"), RD_KAFKA_RESP_ERR_NO_ERROR);
    absl::StatusOr<std::unique_ptr<KafkaDeadLetterWriter>> writer = KafkaDeadLetterWriter::Create(
        {{"bootstrap.servers", cluster_.bootstrap()}, {"log_level", "3"}}, "test-instance");
    ASSERT_TRUE(writer.ok()) << writer.status();
    writer_ = *std::move(writer);
    writer_->Start();
  }
  void TearDown() override {
    if (writer_ != nullptr) writer_->Stop();
  }

  // Writes `letter` and waits (bounded) for its outcome.
  absl::Status Write(DeadLetter letter) {
    absl::Notification written;
    absl::Status result = absl::DeadlineExceededError("no outcome within 30s");
    writer_->Write(std::move(letter), [&](absl::Status status) {
      result = std::move(status);
      written.Notify();
    });
    written.WaitForNotificationWithTimeout(absl::Seconds(30));
    return result;
  }

  static DeadLetter Letter(size_t payload_bytes) {
    DeadLetter letter;
    letter.dead_letter_topic = "dlq";
    letter.source_topic = "orders";
    letter.source_partition = 2;
    letter.source_offset = 41;
    letter.key = "key-1";
    letter.payload = std::string(payload_bytes, 'p');
    letter.headers = {{"trace", "abc"}};
    letter.timestamp_ms = 1700000000000;
    letter.error = "injected: FAIL";
    letter.attempts = 1;
    letter.processor = "billing";
    return letter;
  }

  MockCluster cluster_;
  std::unique_ptr<KafkaDeadLetterWriter> writer_;
};

TEST_F(DeadLetterWriterTest, LetterThatFitsIsWrittenWhole) {
  DeadLetter letter = Letter(100);
  letter.processor = "";  // a poison record: no processor took it
  ASSERT_TRUE(Write(letter).ok());
  std::vector<Record> records = ReadRecords(cluster_.bootstrap(), "dlq", 1);
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].key, "key-1");
  EXPECT_EQ(records[0].value, std::string(100, 'p'));
  EXPECT_EQ(records[0].Header("trace"), "abc");
  EXPECT_EQ(records[0].Header("ferry.processor"), "") << "present, and empty";
  EXPECT_EQ(records[0].Header("ferry.instance"), "test-instance");
  EXPECT_EQ(records[0].Header("ferry.payload.dropped"), "<missing>");
}

TEST_F(DeadLetterWriterTest, LetterOverMessageMaxBytesIsWrittenWithoutItsPayload) {
  // 2 MB is over the producer's default message.max.bytes (1,000,000):
  // produce() itself refuses it.
  ASSERT_TRUE(Write(Letter(2 << 20)).ok());
  std::vector<Record> records = ReadRecords(cluster_.bootstrap(), "dlq", 1);
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].value, "");
  EXPECT_EQ(records[0].key, "key-1");
  EXPECT_EQ(records[0].Header("trace"), "abc");
  EXPECT_EQ(records[0].Header("ferry.payload.dropped"), "true");
  EXPECT_THAT(records[0].Header("ferry.dropped.reason"),
              HasSubstr("2097152-byte payload the letter is over the producer's message.max.bytes"));
  EXPECT_EQ(records[0].Header("ferry.key.dropped"), "<missing>");
  EXPECT_EQ(records[0].Header("ferry.source.offset"), "41");
  EXPECT_EQ(records[0].Header("ferry.processor"), "billing");
  EXPECT_EQ(records[0].Header("ferry.error"), "injected: FAIL");
}

TEST_F(DeadLetterWriterTest, LetterStillTooBigWithoutPayloadDropsKeyAndHeadersToo) {
  DeadLetter letter = Letter(2 << 20);
  letter.key = std::string(600000, 'k');
  letter.headers.emplace_back("big", std::string(600000, 'h'));
  letter.error = std::string(5000, 'e');  // a worker's huge FAIL message
  ASSERT_TRUE(Write(letter).ok());
  std::vector<Record> records = ReadRecords(cluster_.bootstrap(), "dlq", 1);
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].value, "");
  EXPECT_FALSE(records[0].key.has_value());
  EXPECT_EQ(records[0].Header("trace"), "<missing>");
  EXPECT_EQ(records[0].Header("big"), "<missing>");
  EXPECT_EQ(records[0].Header("ferry.payload.dropped"), "true");
  EXPECT_EQ(records[0].Header("ferry.key.dropped"), "true");
  EXPECT_EQ(records[0].Header("ferry.headers.dropped"), "true");
  EXPECT_THAT(records[0].Header("ferry.dropped.reason"), HasSubstr("even without its"));
  EXPECT_EQ(records[0].Header("ferry.error"), std::string(256, 'e'));
  EXPECT_EQ(records[0].Header("ferry.source.topic"), "orders");
  EXPECT_EQ(records[0].Header("ferry.processor"), "billing");
}

TEST_F(DeadLetterWriterTest, LetterTheBrokerRefusesAsTooLargeIsWrittenWithoutItsPayload) {
  rd_kafka_mock_push_request_errors(cluster_.get(), kProduceApiKey, 1,
                                    RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE);
  ASSERT_TRUE(Write(Letter(1000)).ok());
  std::vector<Record> records = ReadRecords(cluster_.bootstrap(), "dlq", 1);
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].value, "");
  EXPECT_EQ(records[0].Header("ferry.payload.dropped"), "true");
  EXPECT_THAT(records[0].Header("ferry.dropped.reason"), HasSubstr("the broker's limit"));
}

TEST_F(DeadLetterWriterTest, OtherErrorsAreReportedAndKeepThePayload) {
  // Not a size problem: the writer reports it (the engine retries the whole
  // letter later) rather than dropping anything.
  rd_kafka_mock_push_request_errors(cluster_.get(), kProduceApiKey, 1,
                                    RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED);
  absl::Status status = Write(Letter(10));
  EXPECT_FALSE(status.ok());
  // Retried as the engine does (librdkafka may keep reporting the topic's
  // error until its next metadata refresh), it lands whole.
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  do {
    status = Write(Letter(10));
  } while (!status.ok() && absl::Now() < deadline);
  ASSERT_TRUE(status.ok()) << status;
  std::vector<Record> records = ReadRecords(cluster_.bootstrap(), "dlq", 1);
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].value, std::string(10, 'p'));
  EXPECT_EQ(records[0].Header("ferry.payload.dropped"), "<missing>");
}

}  // namespace
}  // namespace ferry
