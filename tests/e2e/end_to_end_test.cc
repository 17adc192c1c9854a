// End to end, through real processes and sockets: librdkafka's mock cluster
// (kafka_tool mock), the ferry binary and two example worker processes, one
// of which grants credit 1. 100,000 events over 8 partitions and 1,000 keys.
//
// Checks: every event acked; the group's committed offsets, read back by a
// separate consumer, equal the end offsets; per-key processing order across
// both workers (by CLOCK_MONOTONIC, shared by all processes) equals produce
// order; the credit-1 worker never held more than one event on a stream.
#include <signal.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "gtest/gtest.h"
#include "tests/e2e/subprocess.h"
#include "tests/tools/kafka_admin.h"

namespace ferry::testing {
namespace {

constexpr int kEvents = 100000;
constexpr int kKeys = 1000;
constexpr int kPartitions = 8;
constexpr char kTopic[] = "events";
constexpr char kGroup[] = "ferry-e2e";

std::string TempDir() {
  const char* dir = std::getenv("TEST_TMPDIR");
  return dir != nullptr ? dir : "/tmp";
}

std::string Path(const std::string& name) { return absl::StrCat(TempDir(), "/", name); }

void WriteFile(const std::string& path, const std::string& contents) {
  std::ofstream out(path, std::ios::trunc);
  out << contents;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream contents;
  contents << in.rdbuf();
  return contents.str();
}

std::map<std::string, int64_t> ReadStats(const std::string& path) {
  std::map<std::string, int64_t> stats;
  for (absl::string_view line : absl::StrSplit(ReadFile(path), '\n', absl::SkipEmpty())) {
    std::pair<std::string, std::string> kv = absl::StrSplit(line, absl::MaxSplits('=', 1));
    int64_t value = 0;
    if (absl::SimpleAtoi(kv.second, &value)) stats[kv.first] = value;
  }
  return stats;
}

struct Seen {
  int64_t monotonic_ns = 0;
  int64_t sequence = 0;
};

// Lines: key \t payload(sequence) \t monotonic_ns \t partition \t offset.
void ReadRecord(const std::string& path, std::map<std::string, std::vector<Seen>>* by_key,
                int64_t* lines) {
  for (absl::string_view line : absl::StrSplit(ReadFile(path), '\n', absl::SkipEmpty())) {
    std::vector<absl::string_view> fields = absl::StrSplit(line, '\t');
    ASSERT_GE(fields.size(), 3u) << line;
    Seen seen;
    ASSERT_TRUE(absl::SimpleAtoi(fields[1], &seen.sequence)) << line;
    ASSERT_TRUE(absl::SimpleAtoi(fields[2], &seen.monotonic_ns)) << line;
    (*by_key)[std::string(fields[0])].push_back(seen);
    ++*lines;
  }
}

class EndToEndTest : public ::testing::Test {
 protected:
  void TearDown() override {
    if (HasFailure()) {
      for (Subprocess* process : {&mock_, &ferry_, &worker_a_, &worker_b_}) {
        if (process->pid() > 0) {
          std::cerr << "---- " << process->log_path() << " (tail) ----\n";
          const std::string log = process->Log();
          std::cerr << log.substr(log.size() > 6000 ? log.size() - 6000 : 0) << "\n";
        }
      }
    }
  }

  Subprocess StartOrDie(const std::vector<std::string>& argv, const std::string& log) {
    absl::StatusOr<Subprocess> process = Subprocess::Start(argv, Path(log));
    EXPECT_TRUE(process.ok()) << process.status();
    return std::move(*process);
  }

  Subprocess mock_ = Subprocess::Start({"/bin/true"}, "/dev/null").value();
  Subprocess ferry_ = Subprocess::Start({"/bin/true"}, "/dev/null").value();
  Subprocess worker_a_ = Subprocess::Start({"/bin/true"}, "/dev/null").value();
  Subprocess worker_b_ = Subprocess::Start({"/bin/true"}, "/dev/null").value();
};

TEST_F(EndToEndTest, HundredThousandEventsAckedCommittedAndOrderedPerKey) {
  // 1. The broker.
  mock_ = StartOrDie({"tests/tools/kafka_tool", "mock", absl::StrCat("--partitions=", kPartitions),
                      absl::StrCat("--topics=", kTopic),
                      absl::StrCat("--bootstrap_file=", Path("bootstrap"))},
                     "mock.log");
  absl::StatusOr<std::string> bootstrap = WaitForFile(Path("bootstrap"), absl::Seconds(30));
  ASSERT_TRUE(bootstrap.ok()) << bootstrap.status();
  const std::string servers(absl::StripAsciiWhitespace(*bootstrap));

  // 2. The events: key-i goes to one partition; payload = per-key sequence.
  Subprocess producer = StartOrDie(
      {"tests/tools/kafka_tool", "produce", absl::StrCat("--bootstrap=", servers),
       absl::StrCat("--topic=", kTopic), absl::StrCat("--count=", kEvents),
       absl::StrCat("--keys=", kKeys), absl::StrCat("--partitions=", kPartitions)},
      "produce.log");
  absl::StatusOr<int> produced = producer.Wait(absl::Seconds(120));
  ASSERT_TRUE(produced.ok()) << produced.status();
  ASSERT_EQ(*produced, 0) << producer.Log();

  // 3. Two workers; B grants credit 1.
  worker_a_ = StartOrDie({"clients/cpp/examples/example_worker", "--listen=127.0.0.1:0",
                          "--max_in_flight=64", "--name=worker-a",
                          absl::StrCat("--port_file=", Path("port_a")),
                          absl::StrCat("--record=", Path("record_a")),
                          absl::StrCat("--stats=", Path("stats_a"))},
                         "worker_a.log");
  worker_b_ = StartOrDie({"clients/cpp/examples/example_worker", "--listen=127.0.0.1:0",
                          "--max_in_flight=1", "--name=worker-b",
                          absl::StrCat("--port_file=", Path("port_b")),
                          absl::StrCat("--record=", Path("record_b")),
                          absl::StrCat("--stats=", Path("stats_b"))},
                         "worker_b.log");
  absl::StatusOr<std::string> port_a = WaitForFile(Path("port_a"), absl::Seconds(30));
  absl::StatusOr<std::string> port_b = WaitForFile(Path("port_b"), absl::Seconds(30));
  ASSERT_TRUE(port_a.ok() && port_b.ok());

  // 4. ferry, dialing both workers through one round-robin channel.
  WriteFile(Path("ferry.yaml"),
            absl::StrCat("kafka:\n"
                         "  bootstrap.servers: ", servers, "\n",
                         "  group.id: ", kGroup, "\n",
                         "  session.timeout.ms: 6000\n"
                         "  heartbeat.interval.ms: 500\n"
                         "topics:\n"
                         "  - name: ", kTopic, "\n",
                         "    ordering: key\n"
                         "processors:\n"
                         "  - name: default\n"
                         "    target: ipv4:127.0.0.1:", absl::StripAsciiWhitespace(*port_a),
                         ",127.0.0.1:", absl::StripAsciiWhitespace(*port_b), "\n",
                         "    streams: 8\n"
                         "    timeout: 60s\n"
                         "lanes:\n"
                         "  count: 256\n"
                         "server:\n"
                         "  listen: 127.0.0.1:0\n"
                         "commit:\n"
                         "  interval: 200ms\n"
                         "log:\n"
                         "  progress_interval: 1s\n"));
  ferry_ = StartOrDie({"server/ferry", absl::StrCat("--config=", Path("ferry.yaml"))},
                      "ferry.log");

  // 5. Wait until the group's committed offsets reach the end offsets.
  const absl::Time deadline = absl::Now() + absl::Seconds(180);
  test_tools::GroupProgress progress;
  while (absl::Now() < deadline) {
    ASSERT_FALSE(ferry_.TryWait().has_value()) << "ferry exited early";
    absl::StatusOr<test_tools::GroupProgress> read =
        test_tools::ReadGroupProgress(servers, kTopic, kGroup);
    if (read.ok()) {
      progress = *read;
      if (progress.AllCommitted() && progress.TotalEnd() == kEvents) break;
    }
    absl::SleepFor(absl::Milliseconds(250));  // polling the broker
  }
  ASSERT_TRUE(progress.AllCommitted()) << test_tools::FormatGroupProgress(progress);

  // 6. Graceful stop of everything: exit code 0 each.
  ferry_.Signal(SIGTERM);
  absl::StatusOr<int> ferry_exit = ferry_.Wait(absl::Seconds(60));
  ASSERT_TRUE(ferry_exit.ok()) << ferry_exit.status();
  EXPECT_EQ(*ferry_exit, 0);
  for (Subprocess* worker : {&worker_a_, &worker_b_}) {
    worker->Signal(SIGTERM);
    absl::StatusOr<int> exit = worker->Wait(absl::Seconds(30));
    ASSERT_TRUE(exit.ok()) << exit.status();
    EXPECT_EQ(*exit, 0);
  }

  // Committed == end for every partition, read back independently.
  absl::StatusOr<test_tools::OffsetMap> committed =
      test_tools::ReadCommittedOffsets(servers, kTopic, kGroup);
  absl::StatusOr<test_tools::OffsetMap> end = test_tools::ReadEndOffsets(servers, kTopic);
  ASSERT_TRUE(committed.ok() && end.ok());
  ASSERT_EQ(end->size(), static_cast<size_t>(kPartitions));
  int64_t total = 0;
  for (const auto& [partition, end_offset] : *end) {
    EXPECT_EQ(committed->at(partition), end_offset) << "partition " << partition;
    total += end_offset;
  }
  EXPECT_EQ(total, kEvents);

  // Every event was handled; per-key order equals produce order.
  std::map<std::string, std::vector<Seen>> by_key;
  int64_t lines = 0;
  ReadRecord(Path("record_a"), &by_key, &lines);
  ReadRecord(Path("record_b"), &by_key, &lines);
  EXPECT_EQ(lines, kEvents) << "each event exactly once on the happy path";
  ASSERT_EQ(by_key.size(), static_cast<size_t>(kKeys));
  for (auto& [key, seen] : by_key) {
    std::stable_sort(seen.begin(), seen.end(), [](const Seen& a, const Seen& b) {
      return a.monotonic_ns < b.monotonic_ns;
    });
    for (size_t i = 0; i < seen.size(); ++i) {
      ASSERT_EQ(seen[i].sequence, static_cast<int64_t>(i)) << "key " << key;
    }
  }

  // Both workers took part; the credit-1 worker never held two events.
  const std::map<std::string, int64_t> stats_a = ReadStats(Path("stats_a"));
  const std::map<std::string, int64_t> stats_b = ReadStats(Path("stats_b"));
  EXPECT_GT(stats_a.at("events_received"), 0);
  EXPECT_GT(stats_b.at("events_received"), 0);
  EXPECT_EQ(stats_b.at("max_held"), 1);
  EXPECT_EQ(stats_a.at("credit_violations"), 0);
  EXPECT_EQ(stats_b.at("credit_violations"), 0);
  EXPECT_EQ(stats_a.at("events_received") + stats_b.at("events_received"), kEvents);
}

}  // namespace
}  // namespace ferry::testing
