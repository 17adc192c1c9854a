// bench_consume: baseline A of ferry's benchmark (bench/README.md) — the
// limit. A plain librdkafka KafkaConsumer (the C++ API ferry itself uses,
// consume() one message at a time) joins a fresh group, reads the topic from
// the beginning and does nothing with the records; it stops after --count
// records.
//
//   bench_consume --bootstrap B --topic T --count N [--group G]
//                 [--ready_file F] [--timeout_s 600] [--kafka name=value,...]
//
// Prints one JSON line:
//   {"events":N,"seconds":S,"rate":R,"cpu_s":C,"peak_rss_kib":K,"latency":{...},
//    "append_latency":{...}}
// seconds is from the first record to the last; cpu_s is this process' CPU
// (user+system) over its whole life. For kind 'T' values (rate runs only):
// latency is from the send time in the value to the moment consume()
// returned the record; append_latency from the broker's LogAppendTime
// timestamp (topics created with it; 1 ms resolution, so up to 1 ms high).
// --ready_file is written once partitions are assigned.
#include <librdkafka/rdkafkacpp.h>
#include <time.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "bench/bench_common.h"
#include "bench/bench_kafka.h"

ABSL_FLAG(std::string, bootstrap, "", "Bootstrap servers.");
ABSL_FLAG(std::string, topic, "", "Topic to read.");
ABSL_FLAG(std::string, group, "", "Consumer group (default: a fresh one).");
ABSL_FLAG(int64_t, count, 0, "Stop after this many records.");
ABSL_FLAG(std::string, ready_file, "", "Written once partitions are assigned.");
ABSL_FLAG(int64_t, timeout_s, 600, "Give up after this many seconds.");
ABSL_FLAG(std::string, kafka, "",
          "Extra librdkafka properties, name=value[,name=value...] (bench/bench_kafka.h).");

namespace {

int64_t MonotonicMicros() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000 + ts.tv_nsec / 1000;
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const int64_t count = absl::GetFlag(FLAGS_count);
  if (count <= 0) {
    std::fprintf(stderr, "bench_consume: need --count > 0\n");
    return 2;
  }
  ferry::bench::ConsumerOptions options;
  options.bootstrap = absl::GetFlag(FLAGS_bootstrap);
  options.topic = absl::GetFlag(FLAGS_topic);
  options.group = absl::GetFlag(FLAGS_group);
  options.client_id = "ferry-bench-a";
  options.ready_file = absl::GetFlag(FLAGS_ready_file);
  options.extra = ferry::bench::SplitProperties(absl::GetFlag(FLAGS_kafka));
  auto bench_consumer = ferry::bench::BenchConsumer::Create(options);
  if (!bench_consumer.ok()) {
    std::fprintf(stderr, "bench_consume: %s\n", bench_consumer.status().ToString().c_str());
    return 1;
  }
  RdKafka::KafkaConsumer* consumer = (*bench_consumer)->consumer();

  ferry::bench::LatencyHistogram latency;
  ferry::bench::LatencyHistogram append_latency;
  const int64_t deadline = MonotonicMicros() + absl::GetFlag(FLAGS_timeout_s) * 1000000;
  int64_t consumed = 0;
  int64_t first_us = 0;
  int64_t last_us = 0;
  while (consumed < count) {
    std::unique_ptr<RdKafka::Message> message(consumer->consume(100));
    if (message->err() == RdKafka::ERR_NO_ERROR) {
      last_us = MonotonicMicros();
      if (consumed++ == 0) first_us = last_us;
      char kind;
      int64_t send_us;
      if (ferry::bench::ParsePayload(
              absl::string_view(static_cast<const char*>(message->payload()), message->len()),
              &kind, &send_us) &&
          kind == 'T') {
        const int64_t now = ferry::bench::WallMicros();
        latency.Record(now - send_us);
        const RdKafka::MessageTimestamp ts = message->timestamp();
        if (ts.type == RdKafka::MessageTimestamp::MSG_TIMESTAMP_LOG_APPEND_TIME) {
          append_latency.Record(now - ts.timestamp * 1000);
        }
      }
    } else if (message->err() != RdKafka::ERR__TIMED_OUT) {
      std::fprintf(stderr, "bench_consume: %s\n", message->errstr().c_str());
    }
    if (MonotonicMicros() > deadline) {
      std::fprintf(stderr, "bench_consume: timed out after %lld of %lld records\n",
                   static_cast<long long>(consumed), static_cast<long long>(count));
      break;
    }
  }
  const double seconds = static_cast<double>(last_us - first_us) / 1e6;
  const double cpu = ferry::bench::ProcessCpuSeconds();
  std::printf(
      "{\"events\":%lld,\"seconds\":%.3f,\"rate\":%.0f,\"cpu_s\":%.3f,\"peak_rss_kib\":%lld,"
      "\"latency\":%s,\"append_latency\":%s}\n",
      static_cast<long long>(consumed), seconds,
      seconds > 0 ? static_cast<double>(consumed - 1) / seconds : 0.0, cpu,
      static_cast<long long>(ferry::bench::PeakRssKib()), latency.Json().c_str(), append_latency.Json().c_str());
  std::fflush(stdout);
  return consumed >= count ? 0 : 1;
}
