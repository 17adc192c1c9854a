// Kafka faults, injected into librdkafka's mock cluster running inside this
// test process, while the real ferry binary and an example worker run as
// child processes: failed commits, failed fetches, a broker going down and
// up, and the group coordinator moving. In each case ferry recovers by itself
// and nothing is lost: every event is handled at least once and the group's
// committed offsets reach the end offsets.
#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>
#include <signal.h>

#include <functional>
#include <memory>
#include <set>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "tests/e2e/e2e_support.h"

namespace ferry::testing {
namespace {

// Kafka protocol request types (ApiKey), as the mock's error stacks want them.
constexpr int16_t kFetch = 1;
constexpr int16_t kOffsetCommit = 8;
constexpr int16_t kHeartbeat = 12;

constexpr int kEvents = 20000;
constexpr int kKeys = 200;
constexpr int kPartitions = 6;
constexpr int kBrokers = 3;

// A mock cluster of three brokers inside this process.
class InProcessCluster {
 public:
  InProcessCluster() {
    char error[256];
    handle_ = rd_kafka_new(RD_KAFKA_PRODUCER, rd_kafka_conf_new(), error, sizeof(error));
    cluster_ = rd_kafka_mock_cluster_new(handle_, kBrokers);
  }
  ~InProcessCluster() {
    if (cluster_ != nullptr) rd_kafka_mock_cluster_destroy(cluster_);
    if (handle_ != nullptr) rd_kafka_destroy(handle_);
  }
  bool ok() const { return cluster_ != nullptr; }
  rd_kafka_mock_cluster_t* get() const { return cluster_; }
  std::string bootstrap() const { return rd_kafka_mock_cluster_bootstraps(cluster_); }

 private:
  rd_kafka_t* handle_ = nullptr;
  rd_kafka_mock_cluster_t* cluster_ = nullptr;
};

class KafkaFaultsTest : public ::testing::Test {
 protected:
  // Runs the whole pipeline; `inject` is called once ferry has acked some
  // events (mid-stream). Then checks nothing was lost.
  void RunWithFault(const std::string& name, const std::function<void()>& inject) {
    ASSERT_TRUE(cluster_.ok());
    ASSERT_EQ(rd_kafka_mock_topic_create(cluster_.get(), name.c_str(), kPartitions, 1),
              RD_KAFKA_RESP_ERR_NO_ERROR);
    ASSERT_TRUE(Produce(cluster_.bootstrap(), name, kEvents, kKeys, kPartitions).ok());
    absl::StatusOr<Worker> worker = StartWorker(name, 32, 0, {"--work_us=100"});
    ASSERT_TRUE(worker.ok()) << worker.status();
    const std::string group = name + "-group";
    absl::StatusOr<Subprocess> ferry = StartFerry(
        FerryConfig(cluster_.bootstrap(), group, name,
                    absl::StrCat("ipv4:127.0.0.1:", worker->port), 2),
        "ferry-" + name);
    ASSERT_TRUE(ferry.ok()) << ferry.status();

    const absl::Time deadline = absl::Now() + absl::Seconds(60);
    while (LastProgressValue(ferry->Log(), "acked") <= 0) {
      ASSERT_LT(absl::Now(), deadline) << LogTail(*ferry);
      absl::SleepFor(absl::Milliseconds(50));  // polling ferry's progress
    }
    ASSERT_LT(LastProgressValue(ferry->Log(), "acked"), kEvents) << "the fault must hit mid-stream";
    inject();

    absl::StatusOr<test_tools::GroupProgress> progress = WaitAllCommitted(
        cluster_.bootstrap(), name, group, kEvents, *ferry, absl::Seconds(120));
    ASSERT_TRUE(progress.ok()) << progress.status() << "\n" << LogTail(*ferry);
    EXPECT_EQ(Terminate(*ferry, absl::Seconds(30)).value_or(-1), 0) << LogTail(*ferry);
    ASSERT_EQ(Terminate(worker->process, absl::Seconds(30)).value_or(-1), 0);

    absl::StatusOr<std::vector<HandledEvent>> handled = ReadHandledEvents(worker->record_path);
    ASSERT_TRUE(handled.ok()) << handled.status();
    std::set<std::pair<std::string, int64_t>> seen;
    for (const HandledEvent& event : *handled) seen.insert({event.key, event.sequence});
    EXPECT_EQ(seen.size(), static_cast<size_t>(kEvents)) << "every event handled at least once";
    std::cout << name << ": " << handled->size() - seen.size() << " duplicate deliveries\n";
    log_ = ferry->Log();
  }

  InProcessCluster cluster_;
  std::string log_;
};

TEST_F(KafkaFaultsTest, FailedCommitsAreRetried) {
  RunWithFault("commit-errors", [this] {
    rd_kafka_mock_push_request_errors(
        cluster_.get(), kOffsetCommit, 6, RD_KAFKA_RESP_ERR_REQUEST_TIMED_OUT,
        RD_KAFKA_RESP_ERR_COORDINATOR_NOT_AVAILABLE, RD_KAFKA_RESP_ERR_NOT_COORDINATOR,
        RD_KAFKA_RESP_ERR_REQUEST_TIMED_OUT, RD_KAFKA_RESP_ERR__TRANSPORT,
        RD_KAFKA_RESP_ERR_COORDINATOR_LOAD_IN_PROGRESS);
  });
  EXPECT_NE(log_.find("commit failed"), std::string::npos) << "the fault was not hit";
}

TEST_F(KafkaFaultsTest, FailedFetchesAreRetried) {
  RunWithFault("fetch-errors", [this] {
    rd_kafka_mock_push_request_errors(
        cluster_.get(), kFetch, 6, RD_KAFKA_RESP_ERR_NOT_LEADER_FOR_PARTITION,
        RD_KAFKA_RESP_ERR_REQUEST_TIMED_OUT, RD_KAFKA_RESP_ERR__TRANSPORT,
        RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART, RD_KAFKA_RESP_ERR_LEADER_NOT_AVAILABLE,
        RD_KAFKA_RESP_ERR__TRANSPORT);
  });
}

TEST_F(KafkaFaultsTest, BrokerDownAndUp) {
  RunWithFault("broker-down", [this] {
    rd_kafka_mock_broker_set_down(cluster_.get(), 2);
    absl::SleepFor(absl::Seconds(2));  // the outage itself, not synchronisation
    rd_kafka_mock_broker_set_up(cluster_.get(), 2);
  });
}

TEST_F(KafkaFaultsTest, CoordinatorMoves) {
  RunWithFault("coordinator-move", [this] {
    rd_kafka_mock_coordinator_set(cluster_.get(), "group", "coordinator-move-group", 3);
    rd_kafka_mock_push_request_errors(cluster_.get(), kHeartbeat, 2,
                                      RD_KAFKA_RESP_ERR_NOT_COORDINATOR,
                                      RD_KAFKA_RESP_ERR_NOT_COORDINATOR);
    rd_kafka_mock_push_request_errors(cluster_.get(), kOffsetCommit, 2,
                                      RD_KAFKA_RESP_ERR_NOT_COORDINATOR,
                                      RD_KAFKA_RESP_ERR_NOT_COORDINATOR);
  });
}

}  // namespace
}  // namespace ferry::testing
