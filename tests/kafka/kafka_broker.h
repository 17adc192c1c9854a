// KafkaBroker: a real Apache Kafka broker (single node, KRaft, broker and
// controller in one JVM) on 127.0.0.1 for C++ tests. It runs
// `tests/kafka/kafka_broker run DIR` (the same script shell tests use, so the
// broker's configuration lives in one place; see that script for the
// settings: auto-create off, replication factors 1, retention unlimited...).
//
// Finding the jars: the script uses $FERRY_KAFKA_JARS when set, else the
// jars/ directory next to the script's real location (the runfiles symlink
// resolved), i.e. <workspace>/tests/kafka/jars filled by
// tests/kafka/fetch_jars. So `bazel test` needs no flag after
// `tests/kafka/fetch_jars`; `--test_env=FERRY_KAFKA_JARS=/abs/jars` points
// elsewhere. Missing jars or Java make Start() fail (never skip) with the
// script's message.
//
// Lifetime: the broker's JVM runs in its own process group with
// PR_SET_PDEATHSIG=SIGKILL, so it dies with the thread that called Start()
// even when the test is SIGKILLed (a Bazel timeout); call Start() from a
// thread that outlives the broker (gtest's main thread: a test Environment or
// SetUpTestSuite). Stop() and the destructor SIGTERM the process group, then
// SIGKILL after the grace period.
//
// Threading: Start/Stop/destructor from one owner thread; bootstrap(),
// LogTail() and CreateTopic() from any thread.
#ifndef FERRY_TESTS_KAFKA_KAFKA_BROKER_H_
#define FERRY_TESTS_KAFKA_KAFKA_BROKER_H_

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace ferry::testing {

class KafkaBroker {
 public:
  struct Options {
    // The kafka_broker script. Empty: tests/kafka/kafka_broker.sh (a symlink
    // to it, a data dependency of this library) relative to the working
    // directory (a Bazel test's runfiles root, or the workspace), then under
    // $TEST_SRCDIR/$TEST_WORKSPACE.
    std::string script;
    // The broker's directory (configs, data, logs). Empty: a new directory
    // under $TEST_TMPDIR (kept for Bazel to clean), else under /tmp (removed
    // by the destructor unless $FERRY_KAFKA_KEEP_DIR is set).
    std::string dir;
    // Startup (storage format + JVM start) must finish within this. Typical:
    // 3-5 s on an idle 2-core machine.
    absl::Duration start_timeout = absl::Seconds(90);
    // Stop(): SIGTERM, then SIGKILL after this long.
    absl::Duration stop_grace = absl::Seconds(10);
    // More PLAINTEXT listeners on 127.0.0.1 (FERRY_KAFKA_EXTRA_LISTENERS of
    // the script): the broker listens on `port` and advertises
    // `advertised_port` to clients that came through it, e.g. a proxy in
    // front of `port`, so one client's path can be cut alone. bootstrap()
    // stays the direct PLAINTEXT listener.
    struct Listener {
      std::string name;  // upper case, not PLAINTEXT or CONTROLLER
      int port = 0;
      int advertised_port = 0;
    };
    std::vector<Listener> extra_listeners;
  };

  // Starts a broker and returns once it answers metadata requests (retrying
  // with new ports when a chosen port was taken meanwhile). On failure
  // nothing is left running and the error carries the tail of the logs.
  static absl::StatusOr<std::unique_ptr<KafkaBroker>> Start();
  static absl::StatusOr<std::unique_ptr<KafkaBroker>> Start(const Options& options);

  KafkaBroker(const KafkaBroker&) = delete;
  KafkaBroker& operator=(const KafkaBroker&) = delete;
  ~KafkaBroker();

  // "127.0.0.1:PORT" (also written to dir()/bootstrap).
  const std::string& bootstrap() const { return bootstrap_; }
  const std::string& dir() const { return dir_; }
  // The JVM's pid (its process group id); -1 once stopped.
  pid_t pid() const { return pid_; }

  // Creates `name` with `partitions` partitions (replication factor 1) via
  // the Admin API and waits until every partition has a leader.
  absl::Status CreateTopic(const std::string& name, int32_t partitions,
                           absl::Duration timeout = absl::Seconds(30)) const;

  // The last `lines` lines of the script's output and of the broker's log
  // (for failure messages).
  std::string LogTail(int lines = 40) const;

  // Stops the broker (idempotent). Copies broker.log into
  // $TEST_UNDECLARED_OUTPUTS_DIR when Bazel sets it.
  absl::Status Stop();

 private:
  KafkaBroker(pid_t pid, std::string dir, bool remove_dir, Options options)
      : pid_(pid), dir_(std::move(dir)), remove_dir_(remove_dir), options_(std::move(options)) {}

  absl::Status WaitUntilReady();
  void CopyLogToOutputs() const;

  pid_t pid_ = -1;
  std::string dir_;
  bool remove_dir_ = false;
  Options options_;
  std::string bootstrap_;
};

}  // namespace ferry::testing

#endif  // FERRY_TESTS_KAFKA_KAFKA_BROKER_H_
