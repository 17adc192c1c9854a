// Records other tools can put in a topic that ferry must carry without losing
// or stalling anything (issue 20): a header name that is not UTF-8 (a proto3
// string a conforming worker rejects unless ferry sanitises it), and a failed
// event too big for the dead-letter producer. Real processes: the mock
// cluster, ferry, the C++ example worker.
#include <librdkafka/rdkafkacpp.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/e2e/e2e_support.h"

namespace ferry::testing {
namespace {

using ::testing::HasSubstr;

TEST(BadRecordsTest, HeaderNameThatIsNotUtf8IsProcessedAndNoPartitionStalls) {
  constexpr int kPlain = 400;
  constexpr int kBad = 8;
  absl::StatusOr<MockCluster> cluster = StartMockCluster("names", 4);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  ASSERT_TRUE(Produce(cluster->bootstrap, "names", kPlain, 40, 4).ok());
  // Two records per partition whose header name is C3 28: an invalid UTF-8
  // sequence, the reproduction of issue 20.
  Subprocess producer =
      Subprocess::Start({"tests/tools/kafka_tool", "produce",
                         absl::StrCat("--bootstrap=", cluster->bootstrap), "--topic=names",
                         absl::StrCat("--count=", kBad), "--keys=4", "--partitions=4",
                         "--key_prefix=bad-", "--headers=\xc3\x28=v"},
                        TempPath("produce-bad-names.log"))
          .value();
  ASSERT_EQ(producer.Wait(absl::Seconds(60)).value_or(-1), 0) << producer.Log();
  absl::StatusOr<Worker> worker = StartWorker("names", 16);
  ASSERT_TRUE(worker.ok()) << worker.status();
  absl::StatusOr<Subprocess> ferry =
      StartFerry(FerryConfig(cluster->bootstrap, "names-group", "names",
                             absl::StrCat("ipv4:127.0.0.1:", worker->port), 2),
                 "ferry-names");
  ASSERT_TRUE(ferry.ok()) << ferry.status();
  absl::StatusOr<test_tools::GroupProgress> progress = WaitAllCommitted(
      cluster->bootstrap, "names", "names-group", kPlain + kBad, *ferry, absl::Seconds(90));
  ASSERT_TRUE(progress.ok()) << progress.status() << "\n" << LogTail(*ferry);
  EXPECT_EQ(Terminate(*ferry, absl::Seconds(30)).value_or(-1), 0);
  ASSERT_EQ(StopWorker(*worker), 0);
  // Every record was handled by the worker, each exactly once: no stream was
  // reset and nothing redelivered.
  absl::StatusOr<std::vector<HandledEvent>> handled = ReadHandledEvents(worker->record_path);
  ASSERT_TRUE(handled.ok()) << handled.status();
  EXPECT_EQ(handled->size(), static_cast<size_t>(kPlain + kBad));
  int bad = 0;
  for (const HandledEvent& event : *handled) bad += event.key.rfind("bad-", 0) == 0 ? 1 : 0;
  EXPECT_EQ(bad, kBad);
  EXPECT_EQ(LastProgressValue(ferry->Log(), "acked"), kPlain + kBad);
  EXPECT_EQ(LastProgressValue(ferry->Log(), "redelivered"), 0);
  EXPECT_EQ(ReadStats(worker->stats_path).at("events_received"), kPlain + kBad);
}

// Produces `records` (key, value, with header t=x unless `typed` is false) to
// partition 0 of `topic`, allowing records up to 4 MB.
struct Record {
  std::string key;
  std::string value;
  bool typed = true;
};
void ProduceRecords(const std::string& bootstrap, const std::string& topic,
                    const std::vector<Record>& records) {
  std::string error;
  std::unique_ptr<RdKafka::Conf> conf(RdKafka::Conf::create(RdKafka::Conf::CONF_GLOBAL));
  ASSERT_EQ(conf->set("bootstrap.servers", bootstrap, error), RdKafka::Conf::CONF_OK) << error;
  ASSERT_EQ(conf->set("message.max.bytes", "4000000", error), RdKafka::Conf::CONF_OK) << error;
  ASSERT_EQ(conf->set("acks", "all", error), RdKafka::Conf::CONF_OK) << error;
  std::unique_ptr<RdKafka::Producer> producer(RdKafka::Producer::create(conf.get(), error));
  ASSERT_NE(producer, nullptr) << error;
  for (const Record& record : records) {
    RdKafka::Headers* headers = RdKafka::Headers::create();
    if (record.typed) headers->add("t", "x");
    const RdKafka::ErrorCode code = producer->produce(
        topic, 0, RdKafka::Producer::RK_MSG_COPY, const_cast<char*>(record.value.data()),
        record.value.size(), record.key.data(), record.key.size(), 0, headers, nullptr);
    if (code != RdKafka::ERR_NO_ERROR) delete headers;
    ASSERT_EQ(code, RdKafka::ERR_NO_ERROR) << RdKafka::err2str(code);
  }
  ASSERT_EQ(producer->flush(60000), RdKafka::ERR_NO_ERROR);
}

TEST(BadRecordsTest, FailedEventOverMessageMaxBytesIsDeadLetteredWithoutPayloadAndCommitted) {
  // The dead-letter topic exists from the start (the mock cluster would
  // auto-create it with 4 partitions otherwise).
  absl::StatusOr<MockCluster> cluster = StartMockCluster("big,big-dlq", 1);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  const std::string big(2 << 20, 'p');  // 2 MiB: under max_event_bytes (3 MiB), over
                                        // the producer's message.max.bytes (1,000,000)
  ProduceRecords(cluster->bootstrap, "big",
                 {{"k", "0"}, {"k", big}, {"k", "2"}, {"k", "3", /*typed=*/false}});
  // Every event FAILs; the record without header t is poison.
  absl::StatusOr<Worker> worker = StartWorker("failing-big", 16, 0, {"--fail_rate=1"});
  ASSERT_TRUE(worker.ok()) << worker.status();
  std::string config = FerryConfig(cluster->bootstrap, "big-group", "big",
                                   absl::StrCat("ipv4:127.0.0.1:", worker->port), 1,
                                   "failures:\n  dead_letter_topic: big-dlq\n");
  config.replace(config.find("    ordering: key\n"), 17, "    ordering: key\n    type: header:t\n");
  absl::StatusOr<Subprocess> ferry = StartFerry(config, "ferry-big");
  ASSERT_TRUE(ferry.ok()) << ferry.status();
  absl::StatusOr<test_tools::GroupProgress> progress =
      WaitAllCommitted(cluster->bootstrap, "big", "big-group", 4, *ferry, absl::Seconds(60));
  ASSERT_TRUE(progress.ok()) << progress.status() << "\n" << LogTail(*ferry);
  EXPECT_EQ(Terminate(*ferry, absl::Seconds(30)).value_or(-1), 0);
  StopWorker(*worker);

  absl::StatusOr<std::vector<test_tools::ConsumedRecord>> dead =
      test_tools::ReadTopic(cluster->bootstrap, "big-dlq");
  ASSERT_TRUE(dead.ok()) << dead.status();
  ASSERT_EQ(dead->size(), 4u);
  for (const test_tools::ConsumedRecord& record : *dead) {
    const std::string offset = record.Header("ferry.source.offset");
    EXPECT_EQ(record.key, "k") << offset;
    if (offset == "1") {
      EXPECT_EQ(record.value, "") << "the payload is dropped";
      EXPECT_EQ(record.Header("ferry.payload.dropped"), "true");
      EXPECT_THAT(record.Header("ferry.dropped.reason"), HasSubstr("message.max.bytes"));
    } else {
      EXPECT_EQ(record.value, offset) << "small letters keep their payload";
      EXPECT_EQ(record.Header("ferry.payload.dropped"), "");
    }
    // Every dead letter says which processor it came from, the poison one
    // too (with an empty value: no processor took it).
    bool has_processor = false;
    for (const auto& [name, value] : record.headers) {
      if (name == "ferry.processor") has_processor = true;
    }
    EXPECT_TRUE(has_processor) << offset;
    EXPECT_EQ(record.Header("ferry.processor"), offset == "3" ? "" : "default") << offset;
  }
}

}  // namespace
}  // namespace ferry::testing
