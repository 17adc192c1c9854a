// Building blocks of ferry's end-to-end tests: a mock Kafka cluster process,
// the producer, example workers, ferry itself and its config, and waiting for
// a group's commits — all real processes talking over loopback sockets.
//
// Paths of binaries are relative to the test's runfiles directory (Bazel runs
// tests there). Threading: one test thread.
#ifndef FERRY_TESTS_E2E_E2E_SUPPORT_H_
#define FERRY_TESTS_E2E_E2E_SUPPORT_H_

#include <grpcpp/grpcpp.h>

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "ferry/v1/control.grpc.pb.h"
#include "tests/e2e/subprocess.h"
#include "tests/tools/kafka_admin.h"

namespace ferry::testing {

// A file in the test's private temp dir.
std::string TempPath(const std::string& name);
std::string ReadFile(const std::string& path);
void WriteFile(const std::string& path, const std::string& contents);

struct MockCluster {
  Subprocess process;
  std::string bootstrap;
};
// `kafka_tool mock` with one topic of `partitions` partitions.
absl::StatusOr<MockCluster> StartMockCluster(const std::string& topic, int partitions);
// StartMockCluster with several topics (e.g. a topic and its dead-letter topic), each
// of `partitions` partitions.
absl::StatusOr<MockCluster> StartMockClusterWithTopics(const std::vector<std::string>& topics,
                                                       int partitions);

// `kafka_tool produce`: `count` records over `keys` keys, key-i pinned to
// partition (i % keys) % partitions, payload = the key's sequence number.
absl::Status Produce(const std::string& bootstrap, const std::string& topic, int count, int keys,
                     int partitions);

struct Worker {
  Subprocess process;
  int port = 0;
  std::string record_path;  // one line per handled event
  std::string stats_path;   // written at shutdown
};
// The example C++ worker. `port` 0 picks a free one.
absl::StatusOr<Worker> StartWorker(const std::string& name, int max_in_flight, int port = 0,
                                   const std::vector<std::string>& extra_flags = {});

// A ferry config for `topic` with one processor dialing `target`; `extra`
// is appended as more top-level YAML. Progress is logged every
// `progress_interval`.
std::string FerryConfig(const std::string& bootstrap, const std::string& group,
                        const std::string& topic, const std::string& target, int streams,
                        const std::string& extra = "",
                        const std::string& progress_interval = "1s");
absl::StatusOr<Subprocess> StartFerry(const std::string& config_yaml, const std::string& name);

// Polls the broker until `group` has committed the end offset of every
// partition of `topic` (and the end offsets sum to `expected_total`). Fails
// early if `ferry` exits.
absl::StatusOr<test_tools::GroupProgress> WaitAllCommitted(const std::string& bootstrap,
                                                           const std::string& topic,
                                                           const std::string& group,
                                                           int64_t expected_total,
                                                           Subprocess& ferry,
                                                           absl::Duration timeout);

// Asks the gRPC health service (grpc.health.v1.Health/Check, service "") at
// 127.0.0.1:`port`; true when it answers SERVING.
absl::StatusOr<bool> IsServing(int port);
// The port of ferry's own gRPC server (Control, health, reflection) from its
// log, or -1.
int FerryHealthPort(const std::string& log);

// ferry's Control port from its log, waiting up to 30 s for the line; -1 if
// ferry exits or never names it.
int WaitForControlPort(Subprocess& ferry);
// Control/GetStatus at 127.0.0.1:`port` (with `authorization: Bearer
// <token>` when `token` is not empty).
absl::StatusOr<v1::GetStatusResponse> GetFerryStatus(int port, const std::string& token = "");

// A processor's target for an example worker.
std::string WorkerTarget(const Worker& worker);

// The value of `name=` in the last `progress:` line of a ferry log, or -1.
int64_t LastProgressValue(const std::string& log, const std::string& name);

// key=value lines (a worker's --stats file).
std::map<std::string, int64_t> ReadStats(const std::string& path);

// FerryConfig with more `kafka:` properties (passed to librdkafka as-is),
// e.g. {{"partition.assignment.strategy", "cooperative-sticky"}}. They come
// after FerryConfig's own kafka properties; name them only once.
std::string FerryConfigWithKafka(
    const std::string& bootstrap, const std::string& group, const std::string& topic,
    const std::string& target, int streams,
    const std::vector<std::pair<std::string, std::string>>& kafka_properties,
    const std::string& extra = "", const std::string& progress_interval = "1s");

// One line of an example worker's --record file: one run of the handler.
struct HandledEvent {
  std::string key;
  int64_t sequence = 0;      // the payload: the key's sequence number (kafka_tool produce)
  int64_t monotonic_ns = 0;  // CLOCK_MONOTONIC at handler start (shared by all processes)
  int32_t partition = -1;
  int64_t offset = -1;
  std::string answer;  // OK, RETRY or FAIL (empty in records without that column)
};
// Parses a --record file. The worker buffers it: read it after the worker
// exited. A missing file is an empty record (the worker handled nothing).
absl::StatusOr<std::vector<HandledEvent>> ReadHandledEvents(const std::string& record_path);

// SIGTERM, then waits up to `timeout`; the exit code.
absl::StatusOr<int> Terminate(Subprocess& process, absl::Duration timeout);

// SIGTERM to an example worker, then waits up to 30 s; its exit code, or -1.
int StopWorker(Worker& worker);

// An in-process gRPC server for `service` (a hostile or scripted worker
// written in the test) on a free loopback port, stored in *port; nullptr if it
// cannot start.
std::unique_ptr<grpc::Server> Serve(grpc::Service* service, int* port);

// The last `max_chars` characters of a process's log, headed by its path
// (for failure messages).
std::string LogTail(const Subprocess& process, size_t max_chars = 6000);

// Polls `done` every `every` until it holds (true) or `timeout` passes
// (false). For state another process changes (logs, files, the broker),
// which cannot signal this one.
template <typename Predicate>
bool PollUntil(Predicate done, absl::Duration timeout,
               absl::Duration every = absl::Milliseconds(100)) {
  const absl::Time deadline = absl::Now() + timeout;
  while (!done()) {
    if (absl::Now() >= deadline) return false;
    absl::SleepFor(every);  // polling, bounded by `deadline`
  }
  return true;
}

}  // namespace ferry::testing

#endif  // FERRY_TESTS_E2E_E2E_SUPPORT_H_
