// kafka_tool mock: a librdkafka mock cluster in this process.
//
// Quirks of the librdkafka 2.0.2 mock (DESIGN §5): unknown topics are
// auto-created with 4 partitions on first use, nothing is persisted,
// ListOffsets by timestamp returns -1, and members of one group must list the
// same first partition.assignment.strategy.
#include <fcntl.h>
#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "tests/tools/kafka_tool_commands.h"

namespace ferry::test_tools {
namespace {

absl::Status ErrnoError(absl::string_view what, const std::string& path) {
  return absl::InternalError(
      absl::StrCat(what, " ", path, ": ", std::strerror(errno)));
}

// Writes `contents` to a temporary file beside `path` and renames it over
// `path`, so readers see either no file or the whole contents.
absl::Status WriteFileAtomically(const std::string& path,
                                 const std::string& contents) {
  const std::string tmp = absl::StrCat(path, ".tmp.", getpid());
  const int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
                      0644);
  if (fd < 0) return ErrnoError("open", tmp);
  size_t written = 0;
  while (written < contents.size()) {
    const ssize_t n =
        write(fd, contents.data() + written, contents.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const absl::Status status = ErrnoError("write", tmp);
      close(fd);
      unlink(tmp.c_str());
      return status;
    }
    written += static_cast<size_t>(n);
  }
  if (fsync(fd) != 0 || close(fd) != 0) {
    const absl::Status status = ErrnoError("fsync/close", tmp);
    unlink(tmp.c_str());
    return status;
  }
  if (rename(tmp.c_str(), path.c_str()) != 0) {
    const absl::Status status = ErrnoError("rename to", path);
    unlink(tmp.c_str());
    return status;
  }
  return absl::OkStatus();
}

struct KafkaDeleter {
  void operator()(rd_kafka_t* rk) const { rd_kafka_destroy(rk); }
};
struct MockClusterDeleter {
  void operator()(rd_kafka_mock_cluster_t* mc) const {
    rd_kafka_mock_cluster_destroy(mc);
  }
};

}  // namespace

int RunMock(const MockOptions& options) {
  if (options.partitions < 1) {
    std::fprintf(stderr, "mock: --partitions must be >= 1\n");
    return kExitUsage;
  }
  if (options.group_initial_rebalance_delay_ms < 0) {
    std::fprintf(stderr, "mock: --group_initial_rebalance_delay_ms must be >= 0\n");
    return kExitUsage;
  }

  // Block the stop signals before librdkafka starts any thread: every thread
  // inherits the mask, so the signals stay pending for sigwait below instead
  // of killing the process from some broker thread.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  if (pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr) != 0) {
    std::fprintf(stderr, "mock: pthread_sigmask failed\n");
    return kExitFailure;
  }

  // The mock cluster hangs off a client handle; a producer nobody uses.
  char errstr[512];
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  // log_level 4 drops the notice that this handle has no bootstrap.servers.
  for (const auto& [name, value] :
       {std::pair<const char*, const char*>{"client.id", "ferry-kafka-tool-mock"},
        {"log_level", "4"}}) {
    if (rd_kafka_conf_set(conf, name, value, errstr, sizeof(errstr)) !=
        RD_KAFKA_CONF_OK) {
      std::fprintf(stderr, "mock: config %s: %s\n", name, errstr);
      rd_kafka_conf_destroy(conf);
      return kExitFailure;
    }
  }
  std::unique_ptr<rd_kafka_t, KafkaDeleter> rk(
      rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof(errstr)));
  if (rk == nullptr) {
    std::fprintf(stderr, "mock: rd_kafka_new: %s\n", errstr);
    rd_kafka_conf_destroy(conf);  // not owned by rd_kafka_new on failure
    return kExitFailure;
  }

  std::unique_ptr<rd_kafka_mock_cluster_t, MockClusterDeleter> cluster(
      rd_kafka_mock_cluster_new(rk.get(), /*broker_cnt=*/1));
  if (cluster == nullptr) {
    std::fprintf(stderr, "mock: rd_kafka_mock_cluster_new failed\n");
    return kExitFailure;
  }
  // Each test starts ferry on an empty group; Kafka's 3 s wait for more
  // members would be 3 s of nothing per start.
  rd_kafka_mock_group_initial_rebalance_delay_ms(
      cluster.get(), options.group_initial_rebalance_delay_ms);

  for (const std::string& topic : options.topics) {
    const rd_kafka_resp_err_t err = rd_kafka_mock_topic_create(
        cluster.get(), topic.c_str(), options.partitions,
        /*replication_factor=*/1);
    if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
      std::fprintf(stderr, "mock: create topic %s: %s\n", topic.c_str(),
                   rd_kafka_err2str(err));
      return kExitFailure;
    }
  }

  const std::string bootstrap = rd_kafka_mock_cluster_bootstraps(cluster.get());
  if (!options.bootstrap_file.empty()) {
    const absl::Status status =
        WriteFileAtomically(options.bootstrap_file, bootstrap);
    if (!status.ok()) {
      std::fprintf(stderr, "mock: %s\n", status.ToString().c_str());
      return kExitFailure;
    }
  }
  std::printf("%s\n", bootstrap.c_str());
  std::fflush(stdout);

  int signal_number = 0;
  if (sigwait(&stop_signals, &signal_number) != 0) {
    std::fprintf(stderr, "mock: sigwait failed\n");
    return kExitFailure;
  }
  std::fprintf(stderr, "mock: got signal %d, shutting down\n", signal_number);
  cluster.reset();
  rk.reset();
  return kExitOk;
}

}  // namespace ferry::test_tools
