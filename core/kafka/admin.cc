#include "core/kafka/admin.h"

#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafkacpp.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "core/common/kafka_status.h"

namespace ferry {
namespace {

// The result event arrives after the request timeout at the latest; allow a
// margin for the client's own bookkeeping.
constexpr absl::Duration kResultMargin = absl::Seconds(5);

int TimeoutMs(absl::Duration timeout) {
  return static_cast<int>(std::clamp<int64_t>(absl::ToInt64Milliseconds(timeout), 1, 1 << 30));
}

absl::Status ToStatus(rd_kafka_resp_err_t err, absl::string_view context) {
  return KafkaErrorToStatus(static_cast<RdKafka::ErrorCode>(err), context);
}

// Owns what rd_kafka_metadata returns.
struct MetadataDeleter {
  void operator()(const rd_kafka_metadata_t* metadata) const { rd_kafka_metadata_destroy(metadata); }
};
using Metadata = std::unique_ptr<const rd_kafka_metadata_t, MetadataDeleter>;

absl::StatusOr<Metadata> ReadMetadata(rd_kafka_t* handle, rd_kafka_topic_t* only,
                                      absl::Duration timeout, absl::string_view context) {
  const rd_kafka_metadata_t* raw = nullptr;
  const rd_kafka_resp_err_t err =
      rd_kafka_metadata(handle, only == nullptr ? 1 : 0, only, &raw, TimeoutMs(timeout));
  if (err != RD_KAFKA_RESP_ERR_NO_ERROR) return ToStatus(err, context);
  return Metadata(raw);
}

const rd_kafka_metadata_topic_t* FindTopic(const rd_kafka_metadata_t& metadata,
                                           const std::string& topic) {
  for (int i = 0; i < metadata.topic_cnt; ++i) {
    if (topic == metadata.topics[i].topic) return &metadata.topics[i];
  }
  return nullptr;
}

// Every handle and option CreateTopics needs, destroyed together.
struct CreateRequest {
  rd_kafka_NewTopic_t* topic = nullptr;
  rd_kafka_AdminOptions_t* options = nullptr;
  rd_kafka_event_t* event = nullptr;
  ~CreateRequest() {
    if (event != nullptr) rd_kafka_event_destroy(event);
    if (options != nullptr) rd_kafka_AdminOptions_destroy(options);
    if (topic != nullptr) rd_kafka_NewTopic_destroy(topic);
  }
};

absl::Status BuildCreateRequest(rd_kafka_t* handle, const TopicSpec& spec, absl::Duration timeout,
                                CreateRequest& request) {
  char errstr[512] = {0};
  request.topic = rd_kafka_NewTopic_new(spec.name.c_str(), spec.partitions,
                                        spec.replication_factor, errstr, sizeof(errstr));
  if (request.topic == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("topic ", spec.name, ": ", errstr));
  }
  for (const auto& [name, value] : spec.config) {
    const rd_kafka_resp_err_t err =
        rd_kafka_NewTopic_set_config(request.topic, name.c_str(), value.c_str());
    if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
      return ToStatus(err, absl::StrCat("topic ", spec.name, " config ", name, "=", value));
    }
  }
  request.options = rd_kafka_AdminOptions_new(handle, RD_KAFKA_ADMIN_OP_CREATETOPICS);
  if (rd_kafka_AdminOptions_set_request_timeout(request.options, TimeoutMs(timeout), errstr,
                                                sizeof(errstr)) != RD_KAFKA_RESP_ERR_NO_ERROR ||
      rd_kafka_AdminOptions_set_operation_timeout(request.options, TimeoutMs(timeout), errstr,
                                                  sizeof(errstr)) != RD_KAFKA_RESP_ERR_NO_ERROR) {
    return absl::InternalError(absl::StrCat("admin options: ", errstr));
  }
  return absl::OkStatus();
}

absl::Status CreateTopicsResult(rd_kafka_event_t* event, const std::string& context) {
  if (rd_kafka_event_error(event) != RD_KAFKA_RESP_ERR_NO_ERROR) {
    return ToStatus(rd_kafka_event_error(event),
                    absl::StrCat(context, ": ", rd_kafka_event_error_string(event)));
  }
  const rd_kafka_CreateTopics_result_t* result = rd_kafka_event_CreateTopics_result(event);
  if (result == nullptr) {
    return absl::InternalError(
        absl::StrCat(context, ": unexpected event ", rd_kafka_event_name(event)));
  }
  size_t count = 0;
  const rd_kafka_topic_result_t** topics = rd_kafka_CreateTopics_result_topics(result, &count);
  for (size_t i = 0; i < count; ++i) {
    const rd_kafka_resp_err_t err = rd_kafka_topic_result_error(topics[i]);
    if (err == RD_KAFKA_RESP_ERR_NO_ERROR) continue;
    const char* message = rd_kafka_topic_result_error_string(topics[i]);
    return ToStatus(err, absl::StrCat(context, message != nullptr ? ": " : "",
                                      message != nullptr ? message : ""));
  }
  return absl::OkStatus();
}

}  // namespace

KafkaAdmin::KafkaAdmin(rd_kafka_t* handle, rd_kafka_queue_t* queue, std::string context)
    : handle_(handle), queue_(queue), context_(std::move(context)) {}

KafkaAdmin::~KafkaAdmin() {
  rd_kafka_queue_destroy(queue_);
  rd_kafka_destroy(handle_);
}

absl::StatusOr<std::unique_ptr<KafkaAdmin>> KafkaAdmin::Create(
    const std::map<std::string, std::string>& properties, const std::string& context) {
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  char errstr[512] = {0};
  for (const auto& [name, value] : properties) {
    if (IsConsumerOnlyProperty(name)) continue;
    const rd_kafka_conf_res_t set =
        rd_kafka_conf_set(conf, name.c_str(), value.c_str(), errstr, sizeof(errstr));
    absl::Status status =
        KafkaConfResultToStatus(static_cast<RdKafka::Conf::ConfResult>(set), errstr,
                                absl::StrCat("kafka.", name, " (", context, " admin client)"), value);
    if (!status.ok()) {
      rd_kafka_conf_destroy(conf);
      return status;
    }
  }
  // On success rd_kafka_new owns conf; on failure it is still ours.
  rd_kafka_t* handle = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof(errstr));
  if (handle == nullptr) {
    rd_kafka_conf_destroy(conf);
    return absl::InvalidArgumentError(absl::StrCat(context, " admin client: ", errstr));
  }
  return std::unique_ptr<KafkaAdmin>(new KafkaAdmin(handle, rd_kafka_queue_new(handle), context));
}

absl::StatusOr<int> KafkaAdmin::BrokerCount(absl::Duration timeout) {
  absl::StatusOr<Metadata> metadata = ReadMetadata(handle_, nullptr, timeout, "metadata");
  if (!metadata.ok()) return metadata.status();
  return (*metadata)->broker_cnt;
}

absl::StatusOr<bool> KafkaAdmin::ControllerIsABroker(absl::Duration timeout) {
  absl::StatusOr<Metadata> metadata = ReadMetadata(handle_, nullptr, timeout, "metadata");
  if (!metadata.ok()) return metadata.status();
  const int32_t controller = rd_kafka_controllerid(handle_, TimeoutMs(timeout));
  for (int i = 0; i < (*metadata)->broker_cnt; ++i) {
    if ((*metadata)->brokers[i].id == controller) return true;
  }
  return false;
}

absl::StatusOr<TopicDescription> KafkaAdmin::DescribeTopic(const std::string& topic,
                                                           absl::Duration timeout) {
  absl::StatusOr<Metadata> metadata =
      ReadMetadata(handle_, nullptr, timeout, absl::StrCat("listing topics to find ", topic));
  if (!metadata.ok()) return metadata.status();
  const rd_kafka_metadata_topic_t* found = FindTopic(**metadata, topic);
  if (found == nullptr || found->err == RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART) {
    return absl::NotFoundError(absl::StrCat("topic ", topic, " does not exist in Kafka"));
  }
  TopicDescription description;
  description.status = ToStatus(found->err, absl::StrCat("metadata of topic ", topic));
  description.all_led = true;
  for (int i = 0; i < found->partition_cnt; ++i) {
    const rd_kafka_metadata_partition_t& partition = found->partitions[i];
    description.partitions.push_back(partition.id);
    if (partition.err != RD_KAFKA_RESP_ERR_NO_ERROR || partition.leader < 0) {
      description.all_led = false;
    }
  }
  std::sort(description.partitions.begin(), description.partitions.end());
  return description;
}

absl::StatusOr<int32_t> KafkaAdmin::PartitionCountByName(const std::string& topic,
                                                         absl::Duration timeout) {
  rd_kafka_topic_t* handle = rd_kafka_topic_new(handle_, topic.c_str(), nullptr);
  if (handle == nullptr) {
    return ToStatus(rd_kafka_last_error(), absl::StrCat("topic ", topic));
  }
  absl::StatusOr<Metadata> metadata =
      ReadMetadata(handle_, handle, timeout, absl::StrCat("metadata of topic ", topic));
  rd_kafka_topic_destroy(handle);
  if (!metadata.ok()) return metadata.status();
  const rd_kafka_metadata_topic_t* found = FindTopic(**metadata, topic);
  if (found == nullptr || found->err == RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART ||
      found->partition_cnt == 0) {
    return absl::NotFoundError(absl::StrCat("topic ", topic, " does not exist in Kafka"));
  }
  if (found->err != RD_KAFKA_RESP_ERR_NO_ERROR) {
    return ToStatus(found->err, absl::StrCat("metadata of topic ", topic));
  }
  return found->partition_cnt;
}

absl::Status KafkaAdmin::CreateTopic(const TopicSpec& spec, absl::Duration timeout) {
  const std::string context = absl::StrCat("creating ", context_, " ", spec.name);
  if (spec.name.empty()) return absl::InvalidArgumentError(absl::StrCat(context, ": no name"));
  if (spec.partitions < 1) {
    return absl::InvalidArgumentError(absl::StrCat(context, ": partitions must be >= 1"));
  }
  CreateRequest request;
  absl::Status built = BuildCreateRequest(handle_, spec, timeout, request);
  if (!built.ok()) return built;
  absl::MutexLock lock(&create_mu_);
  // An answer that came after an earlier call gave up is not this one's.
  while (rd_kafka_event_t* stale = rd_kafka_queue_poll(queue_, 0)) rd_kafka_event_destroy(stale);
  rd_kafka_CreateTopics(handle_, &request.topic, 1, request.options, queue_);
  request.event = rd_kafka_queue_poll(queue_, TimeoutMs(timeout + kResultMargin));
  if (request.event == nullptr) {
    // A later answer is dropped by the next call, or with the queue.
    return absl::DeadlineExceededError(absl::StrCat(context, ": no answer from Kafka in ",
                                                    absl::FormatDuration(timeout + kResultMargin)));
  }
  return CreateTopicsResult(request.event, context);
}

absl::Status KafkaAdmin::CreateTopicAndWait(const TopicSpec& spec, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  absl::StatusOr<TopicDescription> existing = DescribeTopic(spec.name, timeout);
  if (existing.ok()) {
    return absl::AlreadyExistsError(absl::StrCat("topic ", spec.name, " already exists with ",
                                                 existing->partitions.size(), " partitions"));
  }
  if (!absl::IsNotFound(existing.status())) return existing.status();
  absl::Status created = CreateTopic(spec, deadline - absl::Now());
  if (!created.ok()) return created;
  absl::Status last = absl::OkStatus();
  for (;;) {
    absl::StatusOr<TopicDescription> topic =
        DescribeTopic(spec.name, std::max(deadline - absl::Now(), absl::Milliseconds(100)));
    if (topic.ok() && topic->status.ok() && topic->all_led &&
        static_cast<int32_t>(topic->partitions.size()) == spec.partitions) {
      return absl::OkStatus();
    }
    last = !topic.ok()           ? topic.status()
           : !topic->status.ok() ? topic->status
                                 : absl::UnavailableError(absl::StrCat(
                                       topic->partitions.size(), " of ", spec.partitions,
                                       " partitions, ", topic->all_led ? "" : "not ",
                                       "all with a leader"));
    if (absl::Now() >= deadline) break;
    absl::SleepFor(absl::Milliseconds(50));  // metadata propagation; polled with a deadline
  }
  return absl::DeadlineExceededError(absl::StrCat("topic ", spec.name,
                                                  " created but not usable within ",
                                                  absl::FormatDuration(timeout), ": ",
                                                  last.message()));
}

absl::StatusOr<std::pair<int64_t, int64_t>> KafkaAdmin::Watermarks(const std::string& topic,
                                                                   int32_t partition,
                                                                   absl::Duration timeout) {
  int64_t low = 0;
  int64_t high = 0;
  const rd_kafka_resp_err_t err = rd_kafka_query_watermark_offsets(
      handle_, topic.c_str(), partition, &low, &high, TimeoutMs(timeout));
  if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
    return ToStatus(err, absl::StrCat("offsets of ", topic, "/", partition));
  }
  return std::make_pair(low, high);
}

absl::StatusOr<std::map<int32_t, int64_t>> KafkaAdmin::OffsetsForTimestamp(
    const std::string& topic, const std::vector<int32_t>& partitions, int64_t timestamp_ms,
    absl::Duration timeout) {
  rd_kafka_topic_partition_list_t* list =
      rd_kafka_topic_partition_list_new(static_cast<int>(partitions.size()));
  // offsets_for_times takes the timestamp in each partition's offset field.
  for (int32_t partition : partitions) {
    rd_kafka_topic_partition_list_add(list, topic.c_str(), partition)->offset = timestamp_ms;
  }
  const std::string context = absl::StrCat("offset for time ", timestamp_ms, " in ", topic);
  absl::StatusOr<std::map<int32_t, int64_t>> result = std::map<int32_t, int64_t>();
  const rd_kafka_resp_err_t err = rd_kafka_offsets_for_times(handle_, list, TimeoutMs(timeout));
  if (err != RD_KAFKA_RESP_ERR_NO_ERROR) result = ToStatus(err, context);
  for (int i = 0; i < list->cnt && result.ok(); ++i) {
    const rd_kafka_topic_partition_t& element = list->elems[i];
    if (element.err != RD_KAFKA_RESP_ERR_NO_ERROR) {
      result = ToStatus(element.err, absl::StrCat(context, "/", element.partition));
    } else {
      // "No such record" comes back as RD_KAFKA_OFFSET_END (-1).
      (*result)[element.partition] = element.offset < 0 ? -1 : element.offset;
    }
  }
  rd_kafka_topic_partition_list_destroy(list);
  return result;
}

}  // namespace ferry
