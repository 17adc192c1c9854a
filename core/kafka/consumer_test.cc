// KafkaConsumer against librdkafka's mock cluster: what it reports about an
// assigned partition before the broker has told it anything.
#include "core/kafka/consumer.h"

#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>

#include <map>
#include <memory>
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
