// A librdkafka in-process mock cluster for unit tests that need a Kafka broker
// (core/control/control_log_test.cc, core/kafka/dead_letter_writer_test.cc): one
// broker, hosted on a throwaway producer handle, torn down with the fixture.
// One copy here instead of one per test file.
//
// Threading: construct, use and destroy from the test's thread; the cluster
// runs its own librdkafka threads, and bootstrap() may be handed to clients on
// any thread.
#ifndef FERRY_TESTS_MOCKS_MOCK_CLUSTER_H_
#define FERRY_TESTS_MOCKS_MOCK_CLUSTER_H_

#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>

#include <string>

namespace ferry::testing {

class MockCluster {
 public:
  // On failure records a gtest failure and leaves ok() false.
  MockCluster();
  ~MockCluster();
  MockCluster(const MockCluster&) = delete;
  MockCluster& operator=(const MockCluster&) = delete;

  bool ok() const { return cluster_ != nullptr; }
  std::string bootstrap() const;
  // Creates `topic` with `partitions` partitions, replication factor 1.
  rd_kafka_resp_err_t CreateTopic(const std::string& topic, int partitions = 1);
  // For fault injection (rd_kafka_mock_push_request_errors and friends).
  rd_kafka_mock_cluster_t* get() { return cluster_; }

 private:
  rd_kafka_t* handle_ = nullptr;
  rd_kafka_mock_cluster_t* cluster_ = nullptr;
};

}  // namespace ferry::testing

#endif  // FERRY_TESTS_MOCKS_MOCK_CLUSTER_H_
