// bench_produce: the benchmark's workload (bench/README.md).
//
//   bench_produce --bootstrap B --topic T --count N [--keys 10000]
//                 [--value_bytes 200] [--rate R --warmup N]
//   bench_produce --bootstrap B --topic T --create_partitions P [--log_append_time]
//
// The second form only creates the topic (replication factor 1; with
// --log_append_time the broker stamps each record with its append time,
// message.timestamp.type=LogAppendTime, which the latency runs measure from)
// and waits until every partition has a leader.
//
// Record i has key "key-<i % keys>" (librdkafka's default partitioner spreads
// the keys over the partitions) and a value of --value_bytes bytes that starts
// with its kind and send time (bench/bench_common.h). Without --rate it
// produces as fast as it can (kind 'B', the backlog); with --rate it paces the
// sends at R records/s, the first --warmup records of kind 'W', then 'T'.
// Ends with flush and prints one JSON line:
//   {"produced":N,"failed":F,"seconds":S,"rate":R}
// Exit 0 when every record was delivered.
#include <librdkafka/rdkafkacpp.h>
#include <time.h>

#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bench/bench_common.h"
#include "core/kafka/admin.h"

ABSL_FLAG(std::string, bootstrap, "", "Bootstrap servers.");
ABSL_FLAG(std::string, topic, "", "Topic to write.");
ABSL_FLAG(int64_t, count, 0, "Records to produce.");
ABSL_FLAG(int32_t, keys, 10000, "Distinct keys: key-0 .. key-(keys-1).");
ABSL_FLAG(int32_t, value_bytes, 200, "Bytes per value (at least 18).");
ABSL_FLAG(double, rate, 0, "Records per second (0: as fast as possible).");
ABSL_FLAG(int64_t, warmup, 0, "With --rate: the first N records are warm-up (kind 'W').");
ABSL_FLAG(int32_t, linger_ms, 5, "linger.ms of the producer.");
ABSL_FLAG(int32_t, create_partitions, 0, "Only create the topic with this many partitions.");
ABSL_FLAG(bool, log_append_time, false, "With --create_partitions: LogAppendTime timestamps.");

namespace {

class DeliveryCounter : public RdKafka::DeliveryReportCb {
 public:
  void dr_cb(RdKafka::Message& message) override {
    if (message.err() == RdKafka::ERR_NO_ERROR) {
      ++delivered;
    } else if (failed++ == 0) {
      std::fprintf(stderr, "bench_produce: delivery failed: %s\n", message.errstr().c_str());
    }
  }
  int64_t delivered = 0;
  int64_t failed = 0;
};

void SleepMicros(int64_t micros) {
  timespec ts{static_cast<time_t>(micros / 1000000), static_cast<long>(micros % 1000000) * 1000};
  nanosleep(&ts, nullptr);
}

int64_t MonotonicMicros() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000 + ts.tv_nsec / 1000;
}

// Creates `topic` (core/kafka/admin) and waits until all its partitions have
// leaders.
int CreateTopic(const std::string& bootstrap, const std::string& topic, int32_t partitions,
                bool log_append_time) {
  absl::StatusOr<std::unique_ptr<ferry::KafkaAdmin>> admin = ferry::KafkaAdmin::Create(
      {{"bootstrap.servers", bootstrap}, {"client.id", "ferry-bench-produce"}}, "bench topic");
  absl::Status status = admin.status();
  if (status.ok()) {
    ferry::TopicSpec spec{topic, partitions, 1, {}};
    if (log_append_time) spec.config.push_back({"message.timestamp.type", "LogAppendTime"});
    status = (*admin)->CreateTopicAndWait(spec, absl::Seconds(120));
  }
  if (!status.ok()) {
    std::fprintf(stderr, "bench_produce: %s\n", status.ToString().c_str());
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const std::string bootstrap = absl::GetFlag(FLAGS_bootstrap);
  const std::string topic = absl::GetFlag(FLAGS_topic);
  const int64_t count = absl::GetFlag(FLAGS_count);
  const int32_t keys = absl::GetFlag(FLAGS_keys);
  const double rate = absl::GetFlag(FLAGS_rate);
  const int64_t warmup = absl::GetFlag(FLAGS_warmup);
  const size_t value_bytes =
      static_cast<size_t>(std::max<int32_t>(absl::GetFlag(FLAGS_value_bytes), 18));
  const int32_t linger_ms = absl::GetFlag(FLAGS_linger_ms);
  if (bootstrap.empty() || topic.empty() || count < 0 || keys < 1 || rate < 0) {
    std::fprintf(stderr, "bench_produce: need --bootstrap, --topic, --count >= 0, --keys >= 1\n");
    return 2;
  }

  if (const int32_t partitions = absl::GetFlag(FLAGS_create_partitions); partitions > 0) {
    return CreateTopic(bootstrap, topic, partitions, absl::GetFlag(FLAGS_log_append_time));
  }

  DeliveryCounter dr;
  std::unique_ptr<RdKafka::Conf> conf(RdKafka::Conf::create(RdKafka::Conf::CONF_GLOBAL));
  const std::vector<std::pair<std::string, std::string>> settings = {
      {"bootstrap.servers", bootstrap},
      {"client.id", "ferry-bench-produce"},
      {"linger.ms", absl::StrCat(linger_ms)},
      {"queue.buffering.max.messages", "1000000"},
      {"queue.buffering.max.kbytes", "1048576"},
      {"batch.num.messages", "10000"},
  };
  std::string errstr;
  for (const auto& [name, value] : settings) {
    if (conf->set(name, value, errstr) != RdKafka::Conf::CONF_OK) {
      std::fprintf(stderr, "bench_produce: %s: %s\n", name.c_str(), errstr.c_str());
      return 1;
    }
  }
  if (conf->set("dr_cb", &dr, errstr) != RdKafka::Conf::CONF_OK) {
    std::fprintf(stderr, "bench_produce: dr_cb: %s\n", errstr.c_str());
    return 1;
  }
  std::unique_ptr<RdKafka::Producer> producer(RdKafka::Producer::create(conf.get(), errstr));
  if (producer == nullptr) {
    std::fprintf(stderr, "bench_produce: %s\n", errstr.c_str());
    return 1;
  }


  std::vector<std::string> key_names;
  key_names.reserve(static_cast<size_t>(keys));
  for (int32_t k = 0; k < keys; ++k) key_names.push_back(absl::StrCat("key-", k));

  std::string value;
  const int64_t start = MonotonicMicros();
  int64_t sent = 0;
  bool failed = false;
  while (sent < count && !failed) {
    int64_t due = count;
    if (rate > 0) {
      due = std::min<int64_t>(
          count, static_cast<int64_t>(static_cast<double>(MonotonicMicros() - start) * rate / 1e6) + 1);
      if (sent >= due) {
        producer->poll(0);
        SleepMicros(100);
        continue;
      }
    }
    for (; sent < due; ++sent) {
      const char kind = rate <= 0 ? 'B' : (sent < warmup ? 'W' : 'T');
      ferry::bench::FormatPayload(kind, ferry::bench::WallMicros(), value_bytes, &value);
      const std::string& key = key_names[static_cast<size_t>(sent % keys)];
      for (;;) {
        const RdKafka::ErrorCode err = producer->produce(
            topic, RdKafka::Topic::PARTITION_UA, RdKafka::Producer::RK_MSG_COPY, value.data(),
            value.size(), key.data(), key.size(), 0, nullptr);
        if (err == RdKafka::ERR_NO_ERROR) break;
        if (err != RdKafka::ERR__QUEUE_FULL) {
          std::fprintf(stderr, "bench_produce: produce: %s\n", RdKafka::err2str(err).c_str());
          failed = true;
          break;
        }
        producer->poll(50);
      }
      if (failed) break;
      if ((sent & 1023) == 0) producer->poll(0);
    }
  }
  const RdKafka::ErrorCode flushed = producer->flush(120000);
  const double seconds = static_cast<double>(MonotonicMicros() - start) / 1e6;
  std::printf("{\"produced\":%lld,\"failed\":%lld,\"seconds\":%.3f,\"rate\":%.0f}\n",
              static_cast<long long>(dr.delivered), static_cast<long long>(dr.failed), seconds,
              seconds > 0 ? static_cast<double>(dr.delivered) / seconds : 0.0);
  std::fflush(stdout);
  if (flushed != RdKafka::ERR_NO_ERROR || failed || dr.delivered != count) {
    std::fprintf(stderr, "bench_produce: %lld of %lld delivered\n",
                 static_cast<long long>(dr.delivered), static_cast<long long>(count));
    return 1;
  }
  return 0;
}
