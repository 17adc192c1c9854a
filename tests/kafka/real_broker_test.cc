// Tests against a real Apache Kafka broker (KafkaBroker: one JVM for the
// whole binary): timestamps and headers produced by kafka_tool, offsets by
// timestamp (librdkafka's offsetsForTimes — the mock cluster cannot answer
// it), topic creation through the Admin API, and committed offsets read back
// after a plain librdkafka consumer commits.
//
// A broker that cannot start fails every test with the broker's log tail; it
// never skips.
#include <librdkafka/rdkafkacpp.h>

#include <cstdint>
#include <map>
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
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/e2e/subprocess.h"
#include "tests/kafka/kafka_broker.h"
#include "tests/tools/kafka_admin.h"

namespace ferry::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::Pair;
using test_tools::OffsetMap;

constexpr char kKafkaTool[] = "tests/tools/kafka_tool";

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return absl::StrCat(dir != nullptr ? dir : "/tmp", "/", name);
}

// Runs kafka_tool with `args`; OK when it exits 0, else its output.
absl::Status RunKafkaTool(const std::vector<std::string>& args, const std::string& name) {
  std::vector<std::string> argv = {kKafkaTool};
  argv.insert(argv.end(), args.begin(), args.end());
  absl::StatusOr<Subprocess> tool = Subprocess::Start(argv, TempPath(name + ".log"));
  if (!tool.ok()) return tool.status();
  absl::StatusOr<int> code = tool->Wait(absl::Seconds(90));
  if (!code.ok()) return code.status();
  if (*code != 0) {
    return absl::InternalError(
        absl::StrCat("kafka_tool ", args.empty() ? "" : args[0], " exited ", *code, ":\n",
                     tool->Log()));
  }
  return absl::OkStatus();
}

std::unique_ptr<RdKafka::Conf> ConsumerConf(const std::string& bootstrap,
                                            const std::string& group) {
  std::unique_ptr<RdKafka::Conf> conf(RdKafka::Conf::create(RdKafka::Conf::CONF_GLOBAL));
  std::string errstr;
  for (const auto& [name, value] : std::vector<std::pair<std::string, std::string>>{
           {"bootstrap.servers", bootstrap},
           {"group.id", group},
           {"client.id", "real-broker-test"},
           {"enable.auto.commit", "false"},
           {"auto.offset.reset", "earliest"},
           {"session.timeout.ms", "10000"},
           {"fetch.wait.max.ms", "50"},
       }) {
    EXPECT_EQ(conf->set(name, value, errstr), RdKafka::Conf::CONF_OK) << name << ": " << errstr;
  }
  return conf;
}

struct Record {
  int64_t offset = 0;
  int64_t timestamp_ms = 0;
  RdKafka::MessageTimestamp::MessageTimestampType timestamp_type =
      RdKafka::MessageTimestamp::MSG_TIMESTAMP_NOT_AVAILABLE;
  std::string key;
  std::vector<std::pair<std::string, std::string>> headers;
};

// Every record of every partition of `topic` (offsets [0, ends[p])), read by
// one assigned (not subscribed) consumer.
absl::StatusOr<std::map<int32_t, std::vector<Record>>> ReadTopic(const std::string& bootstrap,
                                                                 const std::string& topic,
                                                                 const OffsetMap& ends) {
  std::unique_ptr<RdKafka::Conf> conf = ConsumerConf(bootstrap, "real-broker-test-reader");
  std::string errstr;
  std::unique_ptr<RdKafka::KafkaConsumer> consumer(
      RdKafka::KafkaConsumer::create(conf.get(), errstr));
  if (consumer == nullptr) return absl::InternalError(errstr);
  std::vector<RdKafka::TopicPartition*> assignment;
  int64_t expected = 0;
  for (const auto& [partition, end] : ends) {
    assignment.push_back(
        RdKafka::TopicPartition::create(topic, partition, RdKafka::Topic::OFFSET_BEGINNING));
    expected += end;
  }
  const RdKafka::ErrorCode assigned = consumer->assign(assignment);
  RdKafka::TopicPartition::destroy(assignment);
  if (assigned != RdKafka::ERR_NO_ERROR) {
    consumer->close();
    return absl::InternalError(RdKafka::err2str(assigned));
  }
  std::map<int32_t, std::vector<Record>> records;
  int64_t read = 0;
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  absl::Status status = absl::OkStatus();
  while (read < expected) {
    if (absl::Now() >= deadline) {
      status = absl::DeadlineExceededError(
          absl::StrCat("read ", read, " of ", expected, " records of ", topic));
      break;
    }
    std::unique_ptr<RdKafka::Message> message(consumer->consume(200));
    if (message->err() == RdKafka::ERR__TIMED_OUT || message->err() == RdKafka::ERR__PARTITION_EOF) {
      continue;
    }
    if (message->err() != RdKafka::ERR_NO_ERROR) {
      status = absl::InternalError(message->errstr());
      break;
    }
    Record record;
    record.offset = message->offset();
    record.timestamp_ms = message->timestamp().timestamp;
    record.timestamp_type = message->timestamp().type;
    if (message->key() != nullptr) record.key = *message->key();
    if (RdKafka::Headers* headers = message->headers(); headers != nullptr) {
      for (const RdKafka::Headers::Header& h : headers->get_all()) {
        record.headers.emplace_back(h.key(), h.value() != nullptr
                                                 ? std::string(static_cast<const char*>(h.value()),
                                                               h.value_size())
                                                 : std::string());
      }
    }
    records[message->partition()].push_back(std::move(record));
    ++read;
  }
  consumer->close();
  if (!status.ok()) return status;
  return records;
}

// The offset offsetsForTimes must return for `timestamp_ms`: the first record
// whose timestamp is >= it, else past-the-end (-1).
int64_t ExpectedOffsetForTime(const std::vector<Record>& records, int64_t timestamp_ms) {
  for (const Record& record : records) {
    if (record.timestamp_ms >= timestamp_ms) return record.offset;
  }
  return test_tools::kOffsetPastEnd;
}

class RealBrokerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const absl::Time start = absl::Now();
    absl::StatusOr<std::unique_ptr<KafkaBroker>> broker = KafkaBroker::Start();
    if (broker.ok()) {
      broker_ = broker->release();
      std::printf("real_broker_test: Kafka broker at %s ready in %s\n",
                  broker_->bootstrap().c_str(), absl::FormatDuration(absl::Now() - start).c_str());
    } else {
      start_error_ = new std::string(broker.status().ToString());
    }
  }

  static void TearDownTestSuite() {
    delete broker_;
    broker_ = nullptr;
    delete start_error_;
    start_error_ = nullptr;
  }

  void SetUp() override {
    if (broker_ == nullptr) {
      GTEST_FAIL() << (start_error_ != nullptr ? *start_error_ : "no broker");
    }
  }

  void TearDown() override {
    if (HasFailure() && broker_ != nullptr) {
      std::printf("%s", broker_->LogTail(60).c_str());
    }
  }

  static const std::string& bootstrap() { return broker_->bootstrap(); }

  static KafkaBroker* broker_;
  static std::string* start_error_;
};

KafkaBroker* RealBrokerTest::broker_ = nullptr;
std::string* RealBrokerTest::start_error_ = nullptr;

TEST_F(RealBrokerTest, OffsetsForTimeFindsFirstRecordAtOrAfterTimestamp) {
  const std::string topic = "timestamps";
  constexpr int kPartitions = 8;
  constexpr int kRecords = 1000;
  constexpr int64_t kStepMs = 10;
  // A fixed instant in the past: the broker rejects timestamps more than an
  // hour ahead (log.message.timestamp.after.max.ms) and keeps old ones forever
  // (kafka_broker sets log.retention.ms=-1).
  constexpr int64_t kT0 = 1'700'000'000'000;

  ASSERT_TRUE(broker_->CreateTopic(topic, kPartitions).ok());
  absl::StatusOr<int32_t> partitions = test_tools::ReadPartitionCount(bootstrap(), topic);
  ASSERT_TRUE(partitions.ok()) << partitions.status();
  EXPECT_EQ(*partitions, kPartitions);
  EXPECT_TRUE(absl::IsAlreadyExists(broker_->CreateTopic(topic, kPartitions)));

  ASSERT_TRUE(RunKafkaTool({"produce", "--bootstrap", bootstrap(), "--topic", topic, "--count",
                            absl::StrCat(kRecords), "--keys", "100", "--partitions",
                            absl::StrCat(kPartitions), "--timestamp_start_ms", absl::StrCat(kT0),
                            "--timestamp_step_ms", absl::StrCat(kStepMs),
                            "--headers", "source=real_broker_test,trace=a=b,empty="},
                           "produce_timestamps")
                  .ok());

  absl::StatusOr<OffsetMap> ends = test_tools::ReadEndOffsets(bootstrap(), topic);
  ASSERT_TRUE(ends.ok()) << ends.status();
  ASSERT_EQ(ends->size(), static_cast<size_t>(kPartitions));

  // Every record, per partition; together they carry exactly the timestamps
  // T0 + i * step, in increasing order within each partition.
  absl::StatusOr<std::map<int32_t, std::vector<Record>>> read = ReadTopic(bootstrap(), topic, *ends);
  ASSERT_TRUE(read.ok()) << read.status();
  std::map<int32_t, std::vector<Record>>& by_partition = *read;
  std::set<int64_t> timestamps;
  int64_t total = 0;
  for (const auto& [partition, end] : *ends) {
    const std::vector<Record>& records = by_partition[partition];
    ASSERT_EQ(static_cast<int64_t>(records.size()), end) << partition;
    int64_t previous = -1;
    for (size_t i = 0; i < records.size(); ++i) {
      const Record& record = records[i];
      EXPECT_EQ(record.offset, static_cast<int64_t>(i)) << topic << "[" << partition << "]";
      EXPECT_EQ(record.timestamp_type, RdKafka::MessageTimestamp::MSG_TIMESTAMP_CREATE_TIME);
      EXPECT_GT(record.timestamp_ms, previous) << topic << "[" << partition << "]@" << record.offset;
      previous = record.timestamp_ms;
      EXPECT_THAT(record.headers, ElementsAre(Pair("source", "real_broker_test"),
                                              Pair("trace", "a=b"), Pair("empty", "")));
      timestamps.insert(record.timestamp_ms);
    }
    total += static_cast<int64_t>(records.size());
  }
  ASSERT_EQ(total, kRecords);
  ASSERT_EQ(timestamps.size(), static_cast<size_t>(kRecords));
  EXPECT_EQ(*timestamps.begin(), kT0);
  EXPECT_EQ(*timestamps.rbegin(), kT0 + (kRecords - 1) * kStepMs);

  // Timestamps in the middle (on a record and between two), before the first
  // record, on the last one, and past the end.
  const std::vector<int64_t> probes = {
      kT0 + 500 * kStepMs,     kT0 + 500 * kStepMs + 5, kT0 - 1, kT0,
      kT0 + 999 * kStepMs,     kT0 + 1000 * kStepMs,
  };
  for (const int64_t probe : probes) {
    SCOPED_TRACE(absl::StrCat("timestamp T0", probe >= kT0 ? "+" : "", probe - kT0, "ms"));
    absl::StatusOr<OffsetMap> offsets = test_tools::OffsetsForTime(bootstrap(), topic, probe);
    ASSERT_TRUE(offsets.ok()) << offsets.status();
    ASSERT_EQ(offsets->size(), static_cast<size_t>(kPartitions));
    for (const auto& [partition, offset] : *offsets) {
      EXPECT_EQ(offset, ExpectedOffsetForTime(by_partition[partition], probe))
          << topic << "[" << partition << "]";
    }
  }

  // Concretely: the middle timestamp lands inside every partition, before the
  // first record means offset 0, and past the last record Kafka answers
  // offset -1 (librdkafka's RD_KAFKA_OFFSET_END), not the end offset.
  absl::StatusOr<OffsetMap> middle =
      test_tools::OffsetsForTime(bootstrap(), topic, kT0 + 500 * kStepMs);
  ASSERT_TRUE(middle.ok()) << middle.status();
  for (const auto& [partition, offset] : *middle) {
    EXPECT_GT(offset, 0) << partition;
    EXPECT_LT(offset, ends->at(partition)) << partition;
  }
  absl::StatusOr<OffsetMap> past = test_tools::OffsetsForTime(bootstrap(), topic, kT0 + 1'000'000);
  ASSERT_TRUE(past.ok()) << past.status();
  for (const auto& [partition, offset] : *past) {
    EXPECT_EQ(offset, test_tools::kOffsetPastEnd) << partition;
  }
  absl::StatusOr<OffsetMap> before = test_tools::OffsetsForTime(bootstrap(), topic, 1);
  ASSERT_TRUE(before.ok()) << before.status();
  for (const auto& [partition, offset] : *before) EXPECT_EQ(offset, 0) << partition;
}

TEST_F(RealBrokerTest, ReadCommittedOffsetsAfterConsumerCommits) {
  const std::string topic = "commits";
  const std::string group = "real-broker-test-group";
  constexpr int kPartitions = 4;
  constexpr int kRecords = 200;
  ASSERT_TRUE(broker_->CreateTopic(topic, kPartitions).ok());
  ASSERT_TRUE(RunKafkaTool({"produce", "--bootstrap", bootstrap(), "--topic", topic, "--count",
                            absl::StrCat(kRecords), "--keys", "20", "--partitions",
                            absl::StrCat(kPartitions)},
                           "produce_commits")
                  .ok());

  // Nothing committed yet.
  absl::StatusOr<OffsetMap> before = test_tools::ReadCommittedOffsets(bootstrap(), topic, group);
  ASSERT_TRUE(before.ok()) << before.status();
  EXPECT_THAT(*before, ElementsAre(Pair(0, -1), Pair(1, -1), Pair(2, -1), Pair(3, -1)));

  // A subscribed consumer (joins the group) reads everything and commits its
  // positions, then commits an explicit earlier offset for partition 0.
  {
    std::unique_ptr<RdKafka::Conf> conf = ConsumerConf(bootstrap(), group);
    std::string errstr;
    std::unique_ptr<RdKafka::KafkaConsumer> consumer(
        RdKafka::KafkaConsumer::create(conf.get(), errstr));
    ASSERT_NE(consumer, nullptr) << errstr;
    ASSERT_EQ(consumer->subscribe({topic}), RdKafka::ERR_NO_ERROR);
    int consumed = 0;
    const absl::Time deadline = absl::Now() + absl::Seconds(60);
    while (consumed < kRecords && absl::Now() < deadline) {
      std::unique_ptr<RdKafka::Message> message(consumer->consume(200));
      if (message->err() == RdKafka::ERR_NO_ERROR) {
        ++consumed;
      } else if (message->err() != RdKafka::ERR__TIMED_OUT &&
                 message->err() != RdKafka::ERR__PARTITION_EOF) {
        ADD_FAILURE() << "consume: " << message->errstr();
      }
    }
    ASSERT_EQ(consumed, kRecords);
    ASSERT_EQ(consumer->commitSync(), RdKafka::ERR_NO_ERROR);

    std::vector<RdKafka::TopicPartition*> explicit_offsets = {
        RdKafka::TopicPartition::create(topic, 0, 7)};
    const RdKafka::ErrorCode committed = consumer->commitSync(explicit_offsets);
    const RdKafka::ErrorCode partition_error = explicit_offsets[0]->err();
    RdKafka::TopicPartition::destroy(explicit_offsets);
    ASSERT_EQ(committed, RdKafka::ERR_NO_ERROR);
    ASSERT_EQ(partition_error, RdKafka::ERR_NO_ERROR);
    consumer->close();
  }

  absl::StatusOr<OffsetMap> ends = test_tools::ReadEndOffsets(bootstrap(), topic);
  ASSERT_TRUE(ends.ok()) << ends.status();
  EXPECT_THAT(*ends, ElementsAre(Pair(0, 50), Pair(1, 50), Pair(2, 50), Pair(3, 50)));
  absl::StatusOr<OffsetMap> after = test_tools::ReadCommittedOffsets(bootstrap(), topic, group);
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_THAT(*after, ElementsAre(Pair(0, 7), Pair(1, 50), Pair(2, 50), Pair(3, 50)));

  absl::StatusOr<test_tools::GroupProgress> progress =
      test_tools::ReadGroupProgress(bootstrap(), topic, group);
  ASSERT_TRUE(progress.ok()) << progress.status();
  EXPECT_FALSE(progress->AllCommitted());
  EXPECT_EQ(progress->TotalCommitted(), 157);
  EXPECT_EQ(progress->TotalEnd(), 200);

  // Another group has committed nothing.
  absl::StatusOr<OffsetMap> other =
      test_tools::ReadCommittedOffsets(bootstrap(), topic, "real-broker-test-other");
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_THAT(*other, ElementsAre(Pair(0, -1), Pair(1, -1), Pair(2, -1), Pair(3, -1)));
}

TEST_F(RealBrokerTest, KafkaToolCreatesTopicsAndAnswersOffsetsForTime) {
  ASSERT_TRUE(RunKafkaTool({"create-topic", "--bootstrap", bootstrap(), "--topic", "tool-topic",
                            "--partitions", "3"},
                           "create_topic")
                  .ok());
  absl::StatusOr<int32_t> partitions = test_tools::ReadPartitionCount(bootstrap(), "tool-topic");
  ASSERT_TRUE(partitions.ok()) << partitions.status();
  EXPECT_EQ(*partitions, 3);
  // A second create fails (the topic exists); auto-create is off, so an
  // unknown topic stays unknown.
  EXPECT_FALSE(RunKafkaTool({"create-topic", "--bootstrap", bootstrap(), "--topic", "tool-topic",
                             "--partitions", "3"},
                            "create_topic_again")
                   .ok());
  EXPECT_TRUE(absl::IsNotFound(
      test_tools::ReadPartitionCount(bootstrap(), "no-such-topic").status()));
  EXPECT_TRUE(RunKafkaTool({"offsets-for-time", "--bootstrap", bootstrap(), "--topic",
                            "tool-topic", "--timestamp_ms", "1"},
                           "offsets_for_time")
                  .ok());
}

}  // namespace
}  // namespace ferry::testing
