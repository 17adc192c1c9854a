// KafkaConsumer against librdkafka's mock cluster: what it reports about an
// assigned partition before the broker has told it anything.
#include "core/kafka/consumer.h"

#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "core/common/clock.h"
#include "core/config/config.h"
#include "core/engine/engine.h"
#include "gtest/gtest.h"
#include "tests/mocks/decoder_fixtures.h"
#include "tests/mocks/engine_fixtures.h"
#include "tests/mocks/mock_cluster.h"

namespace ferry {
namespace {

// librdkafka's fetch.queue.backoff.ms default (1000 ms) idles a consumer
// that is slower than its fetcher; ferry's default is 10 ms, which the
// `kafka:` map may still override, while the commit settings stay ferry's.
TEST(KafkaConsumerTest, FetchQueueBackoffDefaultsToTenMsAndTheKafkaMapOverridesIt) {
  Config config = testing::EngineTestConfig();
  std::map<std::string, std::string> properties = KafkaConsumer::Properties(config);
  EXPECT_EQ(properties["fetch.queue.backoff.ms"], "10");
  EXPECT_EQ(properties["enable.auto.commit"], "false");

  config.kafka["fetch.queue.backoff.ms"] = "250";
  config.kafka["enable.auto.commit"] = "true";
  properties = KafkaConsumer::Properties(config);
  EXPECT_EQ(properties["fetch.queue.backoff.ms"], "250");
  EXPECT_EQ(properties["enable.auto.commit"], "false");

  // librdkafka accepts the default: Create sets every property.
  config.kafka.erase("enable.auto.commit");
  config.kafka.erase("fetch.queue.backoff.ms");
  config.kafka["group.id"] = "defaults-group";
  config.kafka["bootstrap.servers"] = "127.0.0.1:1";  // never contacted
  Engine engine(config, RealClock::Get());
  std::unique_ptr<Decoder> decoder = testing::MustCreate(config.topics);
  absl::StatusOr<std::unique_ptr<KafkaConsumer>> consumer =
      KafkaConsumer::Create(config, &engine, decoder.get());
  EXPECT_TRUE(consumer.ok()) << consumer.status();
}

// Until its first fetch answer librdkafka knows no high watermark and says
// so with its own sentinel (RD_KAFKA_OFFSET_INVALID, -1001). The consumer's
// contract (and the Control API's end_offset built on it) is -1: the
// sentinel once leaked into GetStatus (tests/kafka/control_test saw it when
// the first fetch came late, in CI and under ASan).
TEST(KafkaConsumerTest, UnknownHighWatermarkIsMinusOne) {
  testing::MockCluster cluster;
  ASSERT_TRUE(cluster.ok());
  ASSERT_EQ(cluster.CreateTopic("t", 1), RD_KAFKA_RESP_ERR_NO_ERROR);
  // Every Fetch fails for a while, so the watermark stays unknown while the
  // partition is assigned.
  std::vector<rd_kafka_resp_err_t> errors(200, RD_KAFKA_RESP_ERR_NOT_LEADER_FOR_PARTITION);
  constexpr int16_t kFetchApiKey = 1;  // the Kafka protocol's ApiKey of Fetch
  rd_kafka_mock_push_request_errors_array(cluster.get(), kFetchApiKey, errors.size(),
                                          errors.data());

  Config config = testing::EngineTestConfig();
  config.kafka["bootstrap.servers"] = cluster.bootstrap();
  config.kafka["group.id"] = "watermark-group";
  config.kafka["auto.offset.reset"] = "earliest";
  Engine engine(config, RealClock::Get());
  std::unique_ptr<Decoder> decoder = testing::MustCreate(config.topics);
  absl::StatusOr<std::unique_ptr<KafkaConsumer>> consumer =
      KafkaConsumer::Create(config, &engine, decoder.get());
  ASSERT_TRUE(consumer.ok()) << consumer.status();
  ASSERT_TRUE((*consumer)->Start().ok());

  const TopicPartition tp{"t", 0};
  std::map<TopicPartition, PartitionFetchState> states;
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (states.count(tp) == 0 && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(20));  // polling for the assignment
    states = (*consumer)->FetchStates();
  }
  ASSERT_EQ(states.count(tp), 1u) << "t/0 was never assigned";
  EXPECT_EQ(states[tp].high_watermark, -1);
  const std::map<TopicPartition, int64_t> high = (*consumer)->HighWatermarks();
  ASSERT_EQ(high.count(tp), 1u);
  EXPECT_EQ(high.at(tp), -1);
  (*consumer)->Stop();
}

}  // namespace
}  // namespace ferry
