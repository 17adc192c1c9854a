#include "tests/tools/kafka_admin.h"

#include <librdkafka/rdkafkacpp.h>

#include <algorithm>
#include <memory>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "core/common/kafka_status.h"
#include "core/kafka/admin.h"

namespace ferry::test_tools {
namespace {

int TimeoutMs(absl::Duration timeout) {
  return static_cast<int>(
      std::clamp<int64_t>(absl::ToInt64Milliseconds(timeout), 1, 1 << 30));
}

// The admin client every query here uses (its own short-lived handle).
absl::StatusOr<std::unique_ptr<KafkaAdmin>> MakeAdmin(const std::string& bootstrap) {
  return KafkaAdmin::Create({{"bootstrap.servers", bootstrap}, {"client.id", "ferry-kafka-admin"}},
                            "kafka_admin");
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

// Partition ids of `topic`, sorted (all topics are listed: asking for one
// could auto-create it).
absl::StatusOr<std::vector<int32_t>> ReadPartitionIds(KafkaAdmin& admin, const std::string& topic,
                                                      absl::Duration timeout) {
  absl::StatusOr<TopicDescription> description = admin.DescribeTopic(topic, timeout);
  if (!description.ok()) return description.status();
  if (!description->status.ok()) return description->status;
  if (description->partitions.empty()) {
    return absl::UnavailableError(absl::StrCat("topic ", topic, " has no partitions yet"));
  }
  return description->partitions;
}

absl::StatusOr<OffsetMap> ReadCommitted(RdKafka::KafkaConsumer& consumer,
                                        const std::string& topic,
                                        const std::vector<int32_t>& ids,
                                        absl::Duration timeout) {
  std::vector<RdKafka::TopicPartition*> partitions;
  for (int32_t id : ids) {
    partitions.push_back(RdKafka::TopicPartition::create(topic, id));
  }
  struct Destroyer {
    std::vector<RdKafka::TopicPartition*>& v;
    ~Destroyer() { RdKafka::TopicPartition::destroy(v); }
  } destroyer{partitions};

  const RdKafka::ErrorCode err =
      consumer.committed(partitions, TimeoutMs(timeout));
  if (err != RdKafka::ERR_NO_ERROR) return KafkaErrorToStatus(err, "committed");

  OffsetMap out;
  for (const RdKafka::TopicPartition* tp : partitions) {
    if (tp->err() != RdKafka::ERR_NO_ERROR) {
      return KafkaErrorToStatus(tp->err(), absl::StrCat("committed offset of ", topic,
                                                "[", tp->partition(), "]"));
    }
    const int64_t offset = tp->offset();
    out[tp->partition()] = offset < 0 ? kNoCommittedOffset : offset;
  }
  return out;
}

absl::StatusOr<OffsetMap> ReadEnds(KafkaAdmin& admin, const std::string& topic,
                                   absl::Duration timeout) {
  auto ids = ReadPartitionIds(admin, topic, timeout);
  if (!ids.ok()) return ids.status();
  OffsetMap out;
  for (int32_t id : *ids) {
    absl::StatusOr<std::pair<int64_t, int64_t>> marks = admin.Watermarks(topic, id, timeout);
    if (!marks.ok()) return marks.status();
    out[id] = marks->second;
  }
  return out;
}

// Committed offsets of `group` for every partition of `topic`.
absl::StatusOr<OffsetMap> ReadGroupCommitted(KafkaAdmin& admin, const std::string& bootstrap,
                                             const std::string& topic, const std::string& group,
                                             absl::Duration timeout) {
  auto ids = ReadPartitionIds(admin, topic, timeout);
  if (!ids.ok()) return ids.status();
  auto consumer = MakeConsumer(bootstrap, group);
  if (!consumer.ok()) return consumer.status();
  ConsumerCloser closer{consumer->get()};
  return ReadCommitted(**consumer, topic, *ids, timeout);
}

}  // namespace

absl::StatusOr<int> ReadBrokerCount(const std::string& bootstrap,
                                    absl::Duration timeout) {
  auto admin = MakeAdmin(bootstrap);
  if (!admin.ok()) return admin.status();
  return (*admin)->BrokerCount(timeout);
}

absl::StatusOr<int32_t> ReadPartitionCount(const std::string& bootstrap,
                                           const std::string& topic,
                                           absl::Duration timeout) {
  auto admin = MakeAdmin(bootstrap);
  if (!admin.ok()) return admin.status();
  auto ids = ReadPartitionIds(**admin, topic, timeout);
  if (!ids.ok()) return ids.status();
  return static_cast<int32_t>(ids->size());
}

absl::StatusOr<OffsetMap> ReadCommittedOffsets(const std::string& bootstrap,
                                               const std::string& topic,
                                               const std::string& group,
                                               absl::Duration timeout) {
  auto admin = MakeAdmin(bootstrap);
  if (!admin.ok()) return admin.status();
  return ReadGroupCommitted(**admin, bootstrap, topic, group, timeout);
}

absl::StatusOr<OffsetMap> ReadEndOffsets(const std::string& bootstrap,
                                         const std::string& topic,
                                         absl::Duration timeout) {
  auto admin = MakeAdmin(bootstrap);
  if (!admin.ok()) return admin.status();
  return ReadEnds(**admin, topic, timeout);
}

absl::StatusOr<GroupProgress> ReadGroupProgress(const std::string& bootstrap,
                                                const std::string& topic,
                                                const std::string& group,
                                                absl::Duration timeout) {
  auto admin = MakeAdmin(bootstrap);
  if (!admin.ok()) return admin.status();
  // Committed offsets first, end offsets second: while records are still
  // being produced or committed this errs towards "not caught up" and never
  // reports committed > end.
  auto committed = ReadGroupCommitted(**admin, bootstrap, topic, group, timeout);
  if (!committed.ok()) return committed.status();
  auto ends = ReadEnds(**admin, topic, timeout);
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
  auto admin = MakeAdmin(bootstrap);
  if (!admin.ok()) return admin.status();
  auto ids = ReadPartitionIds(**admin, topic, timeout);
  if (!ids.ok()) return ids.status();
  auto offsets = (*admin)->OffsetsForTimestamp(topic, *ids, timestamp_ms, timeout);
  if (!offsets.ok()) return offsets.status();
  OffsetMap out;
  for (const auto& [partition, offset] : *offsets) {
    out[partition] = offset < 0 ? kOffsetPastEnd : offset;
  }
  return out;
}

absl::Status CreateTopic(
    const std::string& bootstrap, const std::string& topic,
    int32_t partitions, int16_t replication_factor,
    const std::vector<std::pair<std::string, std::string>>& config,
    absl::Duration timeout) {
  auto admin = MakeAdmin(bootstrap);
  if (!admin.ok()) return admin.status();
  return (*admin)->CreateTopicAndWait({topic, partitions, replication_factor, config}, timeout);
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
  if (assigned != RdKafka::ERR_NO_ERROR) return KafkaErrorToStatus(assigned, "assign");
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
      return KafkaErrorToStatus(message->err(), absl::StrCat("consume ", topic));
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
