#include "tests/tools/kafka_admin.h"

#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafkacpp.h>

#include <algorithm>
#include <memory>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace ferry::test_tools {
namespace {

int TimeoutMs(absl::Duration timeout) {
  return static_cast<int>(
      std::clamp<int64_t>(absl::ToInt64Milliseconds(timeout), 1, 1 << 30));
}

absl::Status KafkaError(RdKafka::ErrorCode code, absl::string_view what) {
  const std::string message = absl::StrCat(what, ": ", RdKafka::err2str(code));
  switch (code) {
    case RdKafka::ERR_NO_ERROR:
      return absl::OkStatus();
    case RdKafka::ERR__TIMED_OUT:
    case RdKafka::ERR_REQUEST_TIMED_OUT:
      return absl::DeadlineExceededError(message);
    case RdKafka::ERR_TOPIC_ALREADY_EXISTS:
      return absl::AlreadyExistsError(message);
    case RdKafka::ERR_INVALID_PARTITIONS:
    case RdKafka::ERR_INVALID_REPLICATION_FACTOR:
    case RdKafka::ERR_TOPIC_EXCEPTION:
    case RdKafka::ERR_INVALID_CONFIG:
    case RdKafka::ERR_INVALID_REQUEST:
      return absl::InvalidArgumentError(message);
    case RdKafka::ERR__UNKNOWN_TOPIC:
    case RdKafka::ERR_UNKNOWN_TOPIC_OR_PART:
    case RdKafka::ERR__UNKNOWN_PARTITION:
      return absl::NotFoundError(message);
    default:
      return absl::UnavailableError(message);
  }
}

// A configuration with the settings every handle here shares.
absl::StatusOr<std::unique_ptr<RdKafka::Conf>> BaseConf(
    const std::string& bootstrap,
    const std::vector<std::pair<std::string, std::string>>& extra) {
  std::unique_ptr<RdKafka::Conf> conf(
      RdKafka::Conf::create(RdKafka::Conf::CONF_GLOBAL));
  std::vector<std::pair<std::string, std::string>> settings = {
      {"bootstrap.servers", bootstrap},
      {"client.id", "ferry-kafka-admin"},
  };
  settings.insert(settings.end(), extra.begin(), extra.end());
  std::string errstr;
  for (const auto& [name, value] : settings) {
    if (conf->set(name, value, errstr) != RdKafka::Conf::CONF_OK) {
      return absl::InvalidArgumentError(
          absl::StrCat("config ", name, "=", value, ": ", errstr));
    }
  }
  return conf;
}

// A consumer with group.id `group` that never subscribes: it can read the
// group's committed offsets and the watermarks without joining the group.
absl::StatusOr<std::unique_ptr<RdKafka::KafkaConsumer>> MakeConsumer(
    const std::string& bootstrap, const std::string& group) {
  auto conf = BaseConf(bootstrap, {{"group.id", group},
                                   {"enable.auto.commit", "false"},
                                   {"enable.auto.offset.store", "false"}});
  if (!conf.ok()) return conf.status();
  std::string errstr;
  std::unique_ptr<RdKafka::KafkaConsumer> consumer(
      RdKafka::KafkaConsumer::create(conf->get(), errstr));
  if (consumer == nullptr) {
    return absl::InternalError(absl::StrCat("create consumer: ", errstr));
  }
  return consumer;
}

// Closes the consumer before it is deleted (required by librdkafka).
struct ConsumerCloser {
  RdKafka::KafkaConsumer* consumer;
  ~ConsumerCloser() {
    if (consumer != nullptr) consumer->close();
  }
};

// Partition ids of `topic`, sorted.
absl::StatusOr<std::vector<int32_t>> ReadPartitionIds(RdKafka::Handle& handle,
                                                      const std::string& topic,
                                                      absl::Duration timeout) {
  RdKafka::Metadata* raw = nullptr;
  // all_topics=true: asking for one topic could auto-create it.
  const RdKafka::ErrorCode err =
      handle.metadata(/*all_topics=*/true, /*only_rkt=*/nullptr, &raw,
                      TimeoutMs(timeout));
  std::unique_ptr<RdKafka::Metadata> metadata(raw);
  if (err != RdKafka::ERR_NO_ERROR) return KafkaError(err, "metadata");

  for (const RdKafka::TopicMetadata* t : *metadata->topics()) {
    if (t->topic() != topic) continue;
    if (t->err() != RdKafka::ERR_NO_ERROR) {
      return KafkaError(t->err(), absl::StrCat("metadata for topic ", topic));
    }
    std::vector<int32_t> ids;
    for (const RdKafka::PartitionMetadata* p : *t->partitions()) {
      ids.push_back(p->id());
    }
    if (ids.empty()) {
      return absl::UnavailableError(
          absl::StrCat("topic ", topic, " has no partitions yet"));
    }
    std::sort(ids.begin(), ids.end());
    return ids;
  }
  return absl::NotFoundError(absl::StrCat("topic ", topic, " not found"));
}

absl::StatusOr<OffsetMap> ReadCommitted(RdKafka::KafkaConsumer& consumer,
                                        const std::string& topic,
                                        absl::Duration timeout) {
  auto ids = ReadPartitionIds(consumer, topic, timeout);
  if (!ids.ok()) return ids.status();

  std::vector<RdKafka::TopicPartition*> partitions;
  for (int32_t id : *ids) {
    partitions.push_back(RdKafka::TopicPartition::create(topic, id));
  }
  struct Destroyer {
    std::vector<RdKafka::TopicPartition*>& v;
    ~Destroyer() { RdKafka::TopicPartition::destroy(v); }
  } destroyer{partitions};

  const RdKafka::ErrorCode err =
      consumer.committed(partitions, TimeoutMs(timeout));
  if (err != RdKafka::ERR_NO_ERROR) return KafkaError(err, "committed");

  OffsetMap out;
  for (const RdKafka::TopicPartition* tp : partitions) {
    if (tp->err() != RdKafka::ERR_NO_ERROR) {
      return KafkaError(tp->err(), absl::StrCat("committed offset of ", topic,
                                                "[", tp->partition(), "]"));
    }
    const int64_t offset = tp->offset();
    out[tp->partition()] = offset < 0 ? kNoCommittedOffset : offset;
  }
  return out;
}

absl::StatusOr<OffsetMap> ReadEnds(RdKafka::Handle& handle,
                                   const std::string& topic,
                                   absl::Duration timeout) {
  auto ids = ReadPartitionIds(handle, topic, timeout);
  if (!ids.ok()) return ids.status();
  OffsetMap out;
  for (int32_t id : *ids) {
    int64_t low = 0;
    int64_t high = 0;
    const RdKafka::ErrorCode err = handle.query_watermark_offsets(
        topic, id, &low, &high, TimeoutMs(timeout));
    if (err != RdKafka::ERR_NO_ERROR) {
      return KafkaError(err,
                        absl::StrCat("watermarks of ", topic, "[", id, "]"));
    }
    out[id] = high;
  }
  return out;
}

// Partition ids of `topic` once every partition has a leader (a new topic's
// partitions get leaders shortly after CreateTopics returns).
absl::StatusOr<std::vector<int32_t>> ReadLedPartitionIds(
    RdKafka::Handle& handle, const std::string& topic, absl::Duration timeout) {
  RdKafka::Metadata* raw = nullptr;
  const RdKafka::ErrorCode err =
      handle.metadata(/*all_topics=*/true, /*only_rkt=*/nullptr, &raw,
                      TimeoutMs(timeout));
  std::unique_ptr<RdKafka::Metadata> metadata(raw);
  if (err != RdKafka::ERR_NO_ERROR) return KafkaError(err, "metadata");
  for (const RdKafka::TopicMetadata* t : *metadata->topics()) {
    if (t->topic() != topic) continue;
    if (t->err() != RdKafka::ERR_NO_ERROR) {
      return KafkaError(t->err(), absl::StrCat("metadata for topic ", topic));
    }
    std::vector<int32_t> ids;
    for (const RdKafka::PartitionMetadata* p : *t->partitions()) {
      if (p->err() != RdKafka::ERR_NO_ERROR || p->leader() < 0) {
        return absl::UnavailableError(absl::StrCat(
            "partition ", topic, "[", p->id(), "] has no leader yet"));
      }
      ids.push_back(p->id());
    }
    std::sort(ids.begin(), ids.end());
    return ids;
  }
  return absl::NotFoundError(absl::StrCat("topic ", topic, " not found"));
}

// Sends CreateTopics and waits for its result (C API: librdkafka's C++ API
// has no Admin client).
absl::Status SendCreateTopics(
    rd_kafka_t* rk, const std::string& topic, int32_t partitions,
    int16_t replication_factor,
    const std::vector<std::pair<std::string, std::string>>& config,
    absl::Duration timeout) {
  char errstr[512] = {0};
  rd_kafka_NewTopic_t* new_topic = rd_kafka_NewTopic_new(
      topic.c_str(), partitions, replication_factor, errstr, sizeof(errstr));
  if (new_topic == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("new topic ", topic, ": ", errstr));
  }
  struct NewTopicDestroyer {
    rd_kafka_NewTopic_t* t;
    ~NewTopicDestroyer() { rd_kafka_NewTopic_destroy(t); }
  } new_topic_destroyer{new_topic};
  for (const auto& [name, value] : config) {
    const rd_kafka_resp_err_t err =
        rd_kafka_NewTopic_set_config(new_topic, name.c_str(), value.c_str());
    if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
      return KafkaError(static_cast<RdKafka::ErrorCode>(err),
                        absl::StrCat("topic config ", name, "=", value));
    }
  }

  rd_kafka_AdminOptions_t* options =
      rd_kafka_AdminOptions_new(rk, RD_KAFKA_ADMIN_OP_CREATETOPICS);
  struct OptionsDestroyer {
    rd_kafka_AdminOptions_t* o;
    ~OptionsDestroyer() { rd_kafka_AdminOptions_destroy(o); }
  } options_destroyer{options};
  if (rd_kafka_AdminOptions_set_request_timeout(options, TimeoutMs(timeout),
                                                errstr, sizeof(errstr)) !=
          RD_KAFKA_RESP_ERR_NO_ERROR ||
      rd_kafka_AdminOptions_set_operation_timeout(
          options, TimeoutMs(timeout), errstr, sizeof(errstr)) !=
          RD_KAFKA_RESP_ERR_NO_ERROR) {
    return absl::InternalError(absl::StrCat("admin options: ", errstr));
  }

  rd_kafka_queue_t* queue = rd_kafka_queue_new(rk);
  struct QueueDestroyer {
    rd_kafka_queue_t* q;
    ~QueueDestroyer() { rd_kafka_queue_destroy(q); }
  } queue_destroyer{queue};
  rd_kafka_CreateTopics(rk, &new_topic, 1, options, queue);

  // The result event arrives after the request timeout at the latest; allow
  // a margin for the client's own bookkeeping.
  rd_kafka_event_t* event =
      rd_kafka_queue_poll(queue, TimeoutMs(timeout + absl::Seconds(5)));
  if (event == nullptr) {
    return absl::DeadlineExceededError(
        absl::StrCat("CreateTopics ", topic, ": no result"));
  }
  struct EventDestroyer {
    rd_kafka_event_t* e;
    ~EventDestroyer() { rd_kafka_event_destroy(e); }
  } event_destroyer{event};
  if (rd_kafka_event_error(event) != RD_KAFKA_RESP_ERR_NO_ERROR) {
    return KafkaError(
        static_cast<RdKafka::ErrorCode>(rd_kafka_event_error(event)),
        absl::StrCat("CreateTopics ", topic, ": ",
                     rd_kafka_event_error_string(event)));
  }
  const rd_kafka_CreateTopics_result_t* result =
      rd_kafka_event_CreateTopics_result(event);
  if (result == nullptr) {
    return absl::InternalError(absl::StrCat(
        "CreateTopics ", topic, ": unexpected event ",
        rd_kafka_event_name(event)));
  }
  size_t count = 0;
  const rd_kafka_topic_result_t** topics =
      rd_kafka_CreateTopics_result_topics(result, &count);
  for (size_t i = 0; i < count; ++i) {
    const rd_kafka_resp_err_t err = rd_kafka_topic_result_error(topics[i]);
    if (err == RD_KAFKA_RESP_ERR_NO_ERROR) continue;
    const char* message = rd_kafka_topic_result_error_string(topics[i]);
    return KafkaError(static_cast<RdKafka::ErrorCode>(err),
                      absl::StrCat("CreateTopics ", topic,
                                   message != nullptr ? ": " : "",
                                   message != nullptr ? message : ""));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<int> ReadBrokerCount(const std::string& bootstrap,
                                    absl::Duration timeout) {
  auto conf = BaseConf(bootstrap, {});
  if (!conf.ok()) return conf.status();
  std::string errstr;
  std::unique_ptr<RdKafka::Producer> producer(
      RdKafka::Producer::create(conf->get(), errstr));
  if (producer == nullptr) {
    return absl::InternalError(absl::StrCat("create producer: ", errstr));
  }
  RdKafka::Metadata* raw = nullptr;
  const RdKafka::ErrorCode err = producer->metadata(
      /*all_topics=*/true, /*only_rkt=*/nullptr, &raw, TimeoutMs(timeout));
  std::unique_ptr<RdKafka::Metadata> metadata(raw);
  if (err != RdKafka::ERR_NO_ERROR) return KafkaError(err, "metadata");
  return static_cast<int>(metadata->brokers()->size());
}

absl::StatusOr<int32_t> ReadPartitionCount(const std::string& bootstrap,
                                           const std::string& topic,
                                           absl::Duration timeout) {
  auto consumer = MakeConsumer(bootstrap, "ferry-kafka-admin");
  if (!consumer.ok()) return consumer.status();
  ConsumerCloser closer{consumer->get()};
  auto ids = ReadPartitionIds(**consumer, topic, timeout);
  if (!ids.ok()) return ids.status();
  return static_cast<int32_t>(ids->size());
}

absl::StatusOr<OffsetMap> ReadCommittedOffsets(const std::string& bootstrap,
                                               const std::string& topic,
                                               const std::string& group,
                                               absl::Duration timeout) {
  auto consumer = MakeConsumer(bootstrap, group);
  if (!consumer.ok()) return consumer.status();
  ConsumerCloser closer{consumer->get()};
  return ReadCommitted(**consumer, topic, timeout);
}

absl::StatusOr<OffsetMap> ReadEndOffsets(const std::string& bootstrap,
                                         const std::string& topic,
                                         absl::Duration timeout) {
  // KafkaConsumer insists on a group.id; this one never joins or commits.
  auto consumer = MakeConsumer(bootstrap, "ferry-kafka-admin");
  if (!consumer.ok()) return consumer.status();
  ConsumerCloser closer{consumer->get()};
  return ReadEnds(**consumer, topic, timeout);
}

absl::StatusOr<GroupProgress> ReadGroupProgress(const std::string& bootstrap,
                                                const std::string& topic,
                                                const std::string& group,
                                                absl::Duration timeout) {
  auto consumer = MakeConsumer(bootstrap, group);
  if (!consumer.ok()) return consumer.status();
  ConsumerCloser closer{consumer->get()};

  // Committed offsets first, end offsets second: while records are still
  // being produced or committed this errs towards "not caught up" and never
  // reports committed > end.
  auto committed = ReadCommitted(**consumer, topic, timeout);
  if (!committed.ok()) return committed.status();
  auto ends = ReadEnds(**consumer, topic, timeout);
  if (!ends.ok()) return ends.status();

  GroupProgress progress;
  for (const auto& [partition, end] : *ends) {
    PartitionOffsets p;
    p.partition = partition;
    p.end = end;
    auto it = committed->find(partition);
    if (it != committed->end()) p.committed = it->second;
    progress.partitions.push_back(p);
  }
  return progress;
}

absl::StatusOr<OffsetMap> OffsetsForTime(const std::string& bootstrap,
                                         const std::string& topic,
                                         int64_t timestamp_ms,
                                         absl::Duration timeout) {
  auto consumer = MakeConsumer(bootstrap, "ferry-kafka-admin");
  if (!consumer.ok()) return consumer.status();
  ConsumerCloser closer{consumer->get()};
  auto ids = ReadPartitionIds(**consumer, topic, timeout);
  if (!ids.ok()) return ids.status();

  // offsetsForTimes takes the timestamp in each partition's offset field.
  std::vector<RdKafka::TopicPartition*> partitions;
  for (int32_t id : *ids) {
    partitions.push_back(RdKafka::TopicPartition::create(topic, id, timestamp_ms));
  }
  struct Destroyer {
    std::vector<RdKafka::TopicPartition*>& v;
    ~Destroyer() { RdKafka::TopicPartition::destroy(v); }
  } destroyer{partitions};

  const RdKafka::ErrorCode err =
      (*consumer)->offsetsForTimes(partitions, TimeoutMs(timeout));
  if (err != RdKafka::ERR_NO_ERROR) {
    return KafkaError(err, absl::StrCat("offsetsForTimes ", topic, " @",
                                        timestamp_ms));
  }
  OffsetMap out;
  for (const RdKafka::TopicPartition* tp : partitions) {
    if (tp->err() != RdKafka::ERR_NO_ERROR) {
      return KafkaError(tp->err(), absl::StrCat("offsetsForTimes ", topic, "[",
                                                tp->partition(), "] @",
                                                timestamp_ms));
    }
    // librdkafka reports "no such record" as RD_KAFKA_OFFSET_END (-1).
    out[tp->partition()] = tp->offset() < 0 ? kOffsetPastEnd : tp->offset();
  }
  return out;
}

absl::Status CreateTopic(
    const std::string& bootstrap, const std::string& topic,
    int32_t partitions, int16_t replication_factor,
    const std::vector<std::pair<std::string, std::string>>& config,
    absl::Duration timeout) {
  if (partitions < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("CreateTopics ", topic, ": partitions must be >= 1"));
  }
  const absl::Time deadline = absl::Now() + timeout;
  // A producer: no group.id needed, and it never auto-creates topics.
  auto conf = BaseConf(bootstrap, {});
  if (!conf.ok()) return conf.status();
  std::string errstr;
  std::unique_ptr<RdKafka::Producer> producer(
      RdKafka::Producer::create(conf->get(), errstr));
  if (producer == nullptr) {
    return absl::InternalError(absl::StrCat("create producer: ", errstr));
  }

  auto existing = ReadPartitionIds(*producer, topic, timeout);
  if (existing.ok()) {
    return absl::AlreadyExistsError(absl::StrCat(
        "topic ", topic, " already exists with ", existing->size(),
        " partitions"));
  }
  if (!absl::IsNotFound(existing.status())) return existing.status();

  absl::Status created =
      SendCreateTopics(producer->c_ptr(), topic, partitions,
                       replication_factor, config, deadline - absl::Now());
  if (!created.ok()) return created;

  // Wait until the metadata shows every partition with a leader.
  absl::Status last = absl::OkStatus();
  for (;;) {
    const absl::Duration left = deadline - absl::Now();
    auto ids = ReadLedPartitionIds(*producer, topic,
                                   std::max(left, absl::Milliseconds(100)));
    if (ids.ok()) {
      if (static_cast<int32_t>(ids->size()) == partitions) {
        return absl::OkStatus();
      }
      last = absl::UnavailableError(
          absl::StrCat("topic ", topic, " shows ", ids->size(), " of ",
                       partitions, " partitions"));
    } else {
      last = ids.status();
    }
    if (absl::Now() >= deadline) break;
    absl::SleepFor(absl::Milliseconds(50));  // metadata propagation
  }
  return absl::DeadlineExceededError(
      absl::StrCat("topic ", topic, " created but not usable within ",
                   absl::FormatDuration(timeout), ": ", last.message()));
}

int64_t GroupProgress::TotalCommitted() const {
  int64_t total = 0;
  for (const PartitionOffsets& p : partitions) {
    if (p.committed > 0) total += p.committed;
  }
  return total;
}

int64_t GroupProgress::TotalEnd() const {
  int64_t total = 0;
  for (const PartitionOffsets& p : partitions) total += p.end;
  return total;
}

bool GroupProgress::AllCommitted() const {
  if (partitions.empty()) return false;
  for (const PartitionOffsets& p : partitions) {
    const bool empty_and_untouched =
        p.end == 0 && p.committed == kNoCommittedOffset;
    if (p.committed != p.end && !empty_and_untouched) return false;
  }
  return true;
}

std::string FormatGroupProgress(const GroupProgress& progress) {
  std::string out;
  for (const PartitionOffsets& p : progress.partitions) {
    absl::StrAppend(&out, "partition=", p.partition, " committed=",
                    p.committed, " end=", p.end, "\n");
  }
  absl::StrAppend(&out, "total_committed=", progress.TotalCommitted(),
                  " total_end=", progress.TotalEnd(), " all_committed=",
                  progress.AllCommitted() ? "true" : "false", "\n");
  return out;
}

std::string ConsumedRecord::Header(const std::string& name) const {
  std::string value;
  for (const auto& [header_name, header_value] : headers) {
    if (header_name == name) value = header_value;
  }
  return value;
}

absl::StatusOr<std::vector<ConsumedRecord>> ReadTopic(const std::string& bootstrap,
                                                      const std::string& topic,
                                                      absl::Duration timeout) {
  absl::StatusOr<OffsetMap> ends = ReadEndOffsets(bootstrap, topic, timeout);
  if (!ends.ok()) return ends.status();
  auto conf = BaseConf(bootstrap, {{"group.id", "ferry-kafka-admin"},
                                   {"enable.auto.commit", "false"},
                                   {"enable.partition.eof", "false"}});
  if (!conf.ok()) return conf.status();
  std::string errstr;
  std::unique_ptr<RdKafka::KafkaConsumer> consumer(
      RdKafka::KafkaConsumer::create(conf->get(), errstr));
  if (consumer == nullptr) return absl::InternalError(absl::StrCat("create consumer: ", errstr));
  ConsumerCloser closer{consumer.get()};
  std::vector<RdKafka::TopicPartition*> assignment;
  for (const auto& [partition, end] : *ends) {
    if (end <= 0) continue;
    assignment.push_back(
        RdKafka::TopicPartition::create(topic, partition, RdKafka::Topic::OFFSET_BEGINNING));
  }
  const RdKafka::ErrorCode assigned = consumer->assign(assignment);
  RdKafka::TopicPartition::destroy(assignment);
  if (assigned != RdKafka::ERR_NO_ERROR) return KafkaError(assigned, "assign");
  std::vector<ConsumedRecord> records;
  const absl::Time deadline = absl::Now() + timeout;
  // Stop when every partition reached its end offset (records below the low
  // watermark may be gone, so count reached ends, not records).
  std::map<int32_t, int64_t> next_offset;
  auto done = [&] {
    for (const auto& [partition, end] : *ends) {
      if (end > 0 && next_offset[partition] < end) return false;
    }
    return true;
  };
  while (!done()) {
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat("read ", records.size(), " records of ", topic, " before the timeout"));
    }
    std::unique_ptr<RdKafka::Message> message(consumer->consume(100));
    if (message->err() == RdKafka::ERR__TIMED_OUT) continue;
    if (message->err() != RdKafka::ERR_NO_ERROR) {
      return KafkaError(message->err(), absl::StrCat("consume ", topic));
    }
    ConsumedRecord record;
    record.partition = message->partition();
    record.offset = message->offset();
    if (message->key_pointer() != nullptr) {
      record.key.emplace(static_cast<const char*>(message->key_pointer()), message->key_len());
    }
    if (message->payload() != nullptr) {
      record.value.assign(static_cast<const char*>(message->payload()), message->len());
    }
    if (RdKafka::Headers* headers = message->headers(); headers != nullptr) {
      for (const RdKafka::Headers::Header& header : headers->get_all()) {
        record.headers.emplace_back(
            header.key(), header.value() == nullptr
                              ? std::string()
                              : std::string(static_cast<const char*>(header.value()),
                                            header.value_size()));
      }
    }
    record.timestamp_ms = message->timestamp().timestamp;
    next_offset[record.partition] = record.offset + 1;
    records.push_back(std::move(record));
  }
  std::sort(records.begin(), records.end(), [](const ConsumedRecord& a, const ConsumedRecord& b) {
    return a.partition != b.partition ? a.partition < b.partition : a.offset < b.offset;
  });
  return records;
}

}  // namespace ferry::test_tools
