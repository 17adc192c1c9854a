// kafka_tool produce: keyed test records with per-key sequence numbers.
#include <librdkafka/rdkafkacpp.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "tests/tools/kafka_tool_commands.h"

namespace ferry::test_tools {
namespace {

// Counts delivery reports; runs on the thread that calls poll()/flush().
class DeliveryCounter : public RdKafka::DeliveryReportCb {
 public:
  void dr_cb(RdKafka::Message& message) override {
    if (message.err() == RdKafka::ERR_NO_ERROR) {
      ++delivered_;
      return;
    }
    if (failed_++ == 0) {
      first_error_ = absl::StrCat("partition ", message.partition(), ": ",
                                  message.errstr());
    }
  }
  int64_t delivered() const { return delivered_; }
  int64_t failed() const { return failed_; }
  const std::string& first_error() const { return first_error_; }

 private:
  int64_t delivered_ = 0;
  int64_t failed_ = 0;
  std::string first_error_;
};

// Reports client errors (fatal idempotence errors among them) on stderr.
class ErrorLogger : public RdKafka::EventCb {
 public:
  void event_cb(RdKafka::Event& event) override {
    if (event.type() != RdKafka::Event::EVENT_ERROR) return;
    std::fprintf(stderr, "produce: %s%s\n", event.fatal() ? "FATAL " : "",
                 event.str().c_str());
  }
};

bool Validate(const ProduceOptions& o) {
  std::string problem;
  if (o.bootstrap.empty()) problem = "--bootstrap is required";
  else if (o.topic.empty()) problem = "--topic is required";
  else if (o.count < 0) problem = "--count must be >= 0";
  else if (o.keys < 1) problem = "--keys must be >= 1";
  else if (o.partitions.has_value() && *o.partitions < 1)
    problem = "--partitions must be >= 1";
  else if (!o.timestamp_start_ms.has_value() && o.timestamp_step_ms != 0)
    problem = "--timestamp_step_ms needs --timestamp_start_ms";
  else if (o.timestamp_start_ms.has_value() &&
           (*o.timestamp_start_ms <= 0 ||
            (o.count > 0 &&
             *o.timestamp_start_ms + (o.count - 1) * o.timestamp_step_ms <= 0)))
    problem = "every record timestamp (--timestamp_start_ms + i * "
              "--timestamp_step_ms) must be > 0";
  else {
    for (const auto& [name, value] : o.headers) {
      if (name.empty()) problem = "--headers: a header name is empty";
    }
  }
  if (problem.empty()) return true;
  std::fprintf(stderr, "produce: %s\n", problem.c_str());
  return false;
}

std::unique_ptr<RdKafka::Producer> MakeProducer(const ProduceOptions& o,
                                                DeliveryCounter* dr,
                                                ErrorLogger* errors) {
  std::unique_ptr<RdKafka::Conf> conf(
      RdKafka::Conf::create(RdKafka::Conf::CONF_GLOBAL));
  const std::vector<std::pair<std::string, std::string>> settings = {
      {"bootstrap.servers", o.bootstrap},
      {"client.id", "ferry-kafka-tool-produce"},
      {"acks", "all"},
      {"enable.idempotence", "true"},
      {"linger.ms", "5"},
  };
  std::string errstr;
  for (const auto& [name, value] : settings) {
    if (conf->set(name, value, errstr) != RdKafka::Conf::CONF_OK) {
      std::fprintf(stderr, "produce: config %s: %s\n", name.c_str(),
                   errstr.c_str());
      return nullptr;
    }
  }
  if (conf->set("dr_cb", dr, errstr) != RdKafka::Conf::CONF_OK ||
      conf->set("event_cb", errors, errstr) != RdKafka::Conf::CONF_OK) {
    std::fprintf(stderr, "produce: callbacks: %s\n", errstr.c_str());
    return nullptr;
  }
  std::unique_ptr<RdKafka::Producer> producer(
      RdKafka::Producer::create(conf.get(), errstr));
  if (producer == nullptr) {
    std::fprintf(stderr, "produce: create producer: %s\n", errstr.c_str());
  }
  return producer;
}

// Enqueues one record, waiting while the local queue is full. `timestamp`
// 0 lets librdkafka use the current time.
RdKafka::ErrorCode Enqueue(
    RdKafka::Producer& producer, const std::string& topic, int32_t partition,
    const std::string& key, const std::string& value, int64_t timestamp,
    const std::vector<std::pair<std::string, std::string>>& headers) {
  for (;;) {
    RdKafka::ErrorCode err;
    if (headers.empty()) {
      err = producer.produce(topic, partition, RdKafka::Producer::RK_MSG_COPY,
                             const_cast<char*>(value.data()), value.size(),
                             key.data(), key.size(), timestamp,
                             /*msg_opaque=*/nullptr);
    } else {
      // produce() takes ownership of the headers only when it succeeds.
      RdKafka::Headers* record_headers = RdKafka::Headers::create();
      for (const auto& [name, header_value] : headers) {
        record_headers->add(name, header_value);
      }
      err = producer.produce(topic, partition, RdKafka::Producer::RK_MSG_COPY,
                             const_cast<char*>(value.data()), value.size(),
                             key.data(), key.size(), timestamp, record_headers,
                             /*msg_opaque=*/nullptr);
      if (err != RdKafka::ERR_NO_ERROR) delete record_headers;
    }
    if (err != RdKafka::ERR__QUEUE_FULL) return err;
    producer.poll(100);  // serve delivery reports to make room
  }
}

}  // namespace

int RunProduce(const ProduceOptions& o) {
  if (!Validate(o)) return kExitUsage;
  DeliveryCounter dr;
  ErrorLogger errors;
  std::unique_ptr<RdKafka::Producer> producer = MakeProducer(o, &dr, &errors);
  if (producer == nullptr) return kExitFailure;

  std::vector<int64_t> next_sequence(static_cast<size_t>(o.keys), 0);
  const absl::Time start = absl::Now();
  int64_t enqueued = 0;
  for (int64_t i = 0; i < o.count; ++i) {
    const int32_t key_index = static_cast<int32_t>(i % o.keys);
    const int32_t partition = o.partitions.has_value()
                                  ? key_index % *o.partitions
                                  : RdKafka::Topic::PARTITION_UA;
    const std::string key = absl::StrCat(o.key_prefix, key_index);
    const std::string value =
        absl::StrCat(next_sequence[static_cast<size_t>(key_index)]++);
    const int64_t timestamp =
        o.timestamp_start_ms.has_value()
            ? *o.timestamp_start_ms + i * o.timestamp_step_ms
            : 0;
    const RdKafka::ErrorCode err = Enqueue(*producer, o.topic, partition, key,
                                           value, timestamp, o.headers);
    if (err != RdKafka::ERR_NO_ERROR) {
      std::fprintf(stderr, "produce: record %lld: %s\n",
                   static_cast<long long>(i), RdKafka::err2str(err).c_str());
      break;
    }
    ++enqueued;
    producer->poll(0);
  }

  const RdKafka::ErrorCode flush_err = producer->flush(
      static_cast<int>(std::max<int64_t>(1, absl::ToInt64Milliseconds(o.timeout))));
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start);

  bool ok = enqueued == o.count;
  if (flush_err != RdKafka::ERR_NO_ERROR) {
    std::fprintf(stderr, "produce: flush: %s (%d records undelivered)\n",
                 RdKafka::err2str(flush_err).c_str(), producer->outq_len());
    ok = false;
  }
  if (dr.failed() > 0) {
    std::fprintf(stderr, "produce: %lld deliveries failed; first: %s\n",
                 static_cast<long long>(dr.failed()),
                 dr.first_error().c_str());
    ok = false;
  }
  if (dr.delivered() != o.count) ok = false;

  std::printf("%s\n",
              absl::StrFormat("produced %d records in %.3fs (%.0f records/s)",
                              dr.delivered(), seconds,
                              seconds > 0 ? dr.delivered() / seconds : 0.0)
                  .c_str());
  if (!ok) {
    std::fprintf(stderr, "produce: FAILED: %lld of %lld records delivered\n",
                 static_cast<long long>(dr.delivered()),
                 static_cast<long long>(o.count));
  }
  return ok ? kExitOk : kExitFailure;
}

}  // namespace ferry::test_tools
