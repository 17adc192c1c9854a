#include "tests/fuzz/engine_model.h"

#include <algorithm>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace ferry::fuzz {
namespace {

constexpr const char* kTopicNames[EngineModel::kTopics] = {"key", "partition", "unordered"};
constexpr Ordering kOrderings[EngineModel::kTopics] = {Ordering::kKey, Ordering::kPartition,
                                                       Ordering::kUnordered};
constexpr int kKeys = 4;

Config MakeConfig(const ModelOptions& options) {
  Config config;
  for (int t = 0; t < EngineModel::kTopics; ++t) {
    config.topics.push_back(TopicConfig{kTopicNames[t], kOrderings[t], {}, {}});
  }
  ProcessorConfig processor;
  processor.name = "p";
  processor.target = "ipv4:127.0.0.1:1";
  processor.max_in_flight = options.max_in_flight;
  processor.max_batch = 4;
  processor.timeout = absl::Seconds(10);
  processor.max_attempts = options.max_attempts;
  processor.retry_backoff = absl::Milliseconds(100);
  processor.retry_backoff_max = absl::Seconds(1);
  processor.retry_on_timeout = options.retry_on_timeout;
  processor.has_on_failure = true;
  processor.on_failure = options.policy;
  config.processors.push_back(processor);
  config.on_failure = options.policy;
  config.lane_count = 4;  // few lanes: keys share them
  config.lane_capacity = 1000;
  config.max_buffered_events = options.max_buffered;
  config.max_delayed_events = options.max_buffered;
  return config;
}

}  // namespace

bool EngineModel::GivenBack(const Delivery& delivery) {
  return delivery.answer == v1::Result::NOT_ATTEMPTED && delivery.run_id != 0 &&
         delivery.run_position > 1;
}

v1::Result::Status EngineModel::Effective(const Delivery& delivery) {
  return delivery.answer == v1::Result::NOT_ATTEMPTED && !GivenBack(delivery) ? v1::Result::RETRY
                                                                               : delivery.answer;
}

bool EngineModel::Held(const Delivery& delivery) const {
  if (options_.policy != FailurePolicy::kBlock || delivery.state != DeliveryState::kAnswered ||
      GivenBack(delivery)) {
    return false;
  }
  const v1::Result::Status answer = Effective(delivery);
  return answer != v1::Result::OK &&
         (answer != v1::Result::RETRY || delivery.attempt >= options_.max_attempts);
}

EngineModel::EngineModel(ModelOptions options) : options_(options) {
  // Thousands of steps log thousands of stream and failure lines: keep the
  // errors only (read once, at the first log line; FERRY_LOG_LEVEL wins).
  setenv("FERRY_LOG_LEVEL", "error", /*overwrite=*/0);
  engine_ = std::make_unique<Engine>(MakeConfig(options_), &clock_);
  engine_->SetStreamResetter([this](WorkerStream* stream) { reset_requests_.push_back(stream); });
  std::vector<TopicPartition> assigned;
  for (int t = 0; t < kTopics; ++t) {
    for (int p = 0; p < options_.partitions; ++p) {
      PartitionModel partition;
      partition.tp = TopicPartition{kTopicNames[t], p};
      partition.ordering = kOrderings[t];
      partition.epoch = next_epoch_++;
      partitions_.push_back(std::move(partition));
      assigned.push_back(TopicPartition{kTopicNames[t], p});
    }
  }
  engine_->OnAssigned(assigned);
}

EngineModel::~EngineModel() {
  engine_.reset();  // before the fake streams it points at
}

EngineModel::Fate EngineModel::FateOf(const OffsetModel& offset) const {
  if (offset.skipped) return Fate::kFinished;
  if (offset.latest == 0) return Fate::kUnfinished;  // never dispatched
  const Delivery& delivery = deliveries_.at(offset.latest);
  switch (delivery.state) {
    case DeliveryState::kOutstanding:
    case DeliveryState::kRequeued:
      return Fate::kUnfinished;
    case DeliveryState::kUnknown:
      return Fate::kUnknown;
    case DeliveryState::kAnswered:
      break;
  }
  if (GivenBack(delivery)) return Fate::kUnfinished;  // back in its lane
  const v1::Result::Status answer = Effective(delivery);
  if (answer == v1::Result::OK) return Fate::kFinished;
  if (answer == v1::Result::RETRY && delivery.attempt < options_.max_attempts) {
    return Fate::kUnfinished;  // waiting out its backoff
  }
  // A terminal failure: `block` holds it, `skip` finishes it.
  return options_.policy == FailurePolicy::kBlock ? Fate::kUnfinished : Fate::kFinished;
}

const char* EngineModel::FateName(Fate fate) {
  switch (fate) {
    case Fate::kUnfinished:
      return "certainly unfinished";
    case Fate::kFinished:
      return "finished";
    case Fate::kUnknown:
      return "unknown";
  }
  return "?";
}

void EngineModel::SetState(uint64_t id, Delivery& delivery, DeliveryState state) {
  if (delivery.state == DeliveryState::kOutstanding) outstanding_.erase(id);
  delivery.state = state;
  if (state == DeliveryState::kOutstanding) outstanding_.insert(id);
}

EngineModel::PartitionModel* EngineModel::Find(const std::string& topic, int32_t partition) {
  for (PartitionModel& candidate : partitions_) {
    if (candidate.tp.topic == topic && candidate.tp.partition == partition) return &candidate;
  }
  return nullptr;
}

EngineModel::StreamModel* EngineModel::StreamAt(int stream) {
  std::vector<StreamModel*> open;
  for (StreamModel& candidate : streams_) {
    if (candidate.open) open.push_back(&candidate);
  }
  if (open.empty()) return nullptr;
  return open[Wrap(stream, static_cast<int>(open.size()))];
}

// ---- Consumer and operator ----

absl::Status EngineModel::Submit(int partition_index, int key) {
  PartitionModel& partition = partitions_[Wrap(partition_index, partition_count())];
  if (!partition.assigned) return absl::OkStatus();
  // The consumer hands over records only while there is room.
  if (engine_->Room().events <= 0 || engine_->OverHighWatermark()) return absl::OkStatus();
  const int64_t offset = partition.next_offset++;
  v1::Event event;
  event.set_topic(partition.tp.topic);
  event.set_partition(partition.tp.partition);
  event.set_offset(offset);
  event.set_key(absl::StrCat("k", Wrap(key, kKeys)));
  event.set_type(partition.tp.topic);
  event.set_payload("x");
  partition.offsets[offset].key = Wrap(key, kKeys);
  partition.max_submitted = offset;
  const std::string record_key = event.key();
  engine_->Submit(std::move(event), 16, record_key);
  return AfterStep();
}

absl::Status EngineModel::Revoke(int partition_index) {
  const int index = Wrap(partition_index, partition_count());
  PartitionModel& partition = partitions_[index];
  if (!partition.assigned) return absl::OkStatus();
  const std::vector<CommitPosition> positions = engine_->OnRevoked({partition.tp});
  for (const CommitPosition& position : positions) {
    if (!(position.partition == partition.tp)) {
      return absl::InternalError(absl::StrCat("OnRevoked(", partition.tp.ToString(),
                                              ") returned a position of ",
                                              position.partition.ToString()));
    }
    absl::Status status = CheckCommit(partition, position.offset, "OnRevoked");
    if (!status.ok()) return status;
    partition.last_committed_any = position.offset;
  }
  partition.assigned = false;
  DropPartitionDeliveries(index);
  NewEpoch(partition);
  return AfterStep();
}

absl::Status EngineModel::Assign(int partition_index) {
  PartitionModel& partition = partitions_[Wrap(partition_index, partition_count())];
  if (partition.assigned) return absl::OkStatus();
  engine_->OnAssigned({partition.tp});
  partition.assigned = true;
  partition.next_offset = partition.last_committed_any;  // where a new owner resumes
  return AfterStep();
}

absl::Status EngineModel::Reset(int partition_index, bool rewind) {
  const int index = Wrap(partition_index, partition_count());
  PartitionModel& partition = partitions_[index];
  if (!partition.assigned) return absl::OkStatus();
  engine_->ResetPartition(partition.tp);
  DropPartitionDeliveries(index);
  NewEpoch(partition);
  if (rewind) partition.next_offset = partition.last_committed_any;
  return AfterStep();
}

absl::Status EngineModel::Skip(int partition_index, int pick) {
  PartitionModel& partition = partitions_[Wrap(partition_index, partition_count())];
  if (!partition.assigned || partition.offsets.empty()) return absl::OkStatus();
  auto it = partition.offsets.begin();
  std::advance(it, Wrap(pick, static_cast<int>(partition.offsets.size())));
  return SkipAt(partition, it->first);
}

absl::Status EngineModel::SkipAt(PartitionModel& partition, int64_t offset) {
  auto it = partition.offsets.find(offset);
  const Fate fate = it == partition.offsets.end() ? Fate::kFinished : FateOf(it->second);
  const absl::StatusOr<std::string> skipped = engine_->SkipOffset(partition.tp, offset);
  const std::string where = absl::StrCat(partition.tp.ToString(), "@", offset);
  if (skipped.ok()) {
    if (fate == Fate::kFinished) {
      return absl::InternalError(
          absl::StrCat("SkipOffset(", where, ") found work for an offset that is finished"));
    }
    it->second.skipped = true;
    if (it->second.latest != 0) {
      Delivery& delivery = deliveries_.at(it->second.latest);
      if (delivery.state == DeliveryState::kOutstanding) {
        SetState(it->second.latest, delivery, DeliveryState::kUnknown);  // cancelled
      }
    }
  } else if (fate == Fate::kUnfinished && it->second.latest != 0 &&
             (deliveries_.at(it->second.latest).state == DeliveryState::kOutstanding ||
              Held(deliveries_.at(it->second.latest)))) {
    // In flight or held by `block`: SkipOffset's documented cases. (A retry
    // may be waiting out its backoff or queued again: the model cannot tell.)
    return absl::InternalError(absl::StrCat("SkipOffset(", where, ") refused an offset that is ",
                                            Describe(it->second), ": ",
                                            skipped.status().ToString()));
  }
  return AfterStep();
}

absl::Status EngineModel::Commit() {
  const std::vector<CommitPosition> positions = engine_->PendingCommits();
  for (const CommitPosition& position : positions) {
    PartitionModel* partition = Find(position.partition.topic, position.partition.partition);
    if (partition == nullptr || !partition->assigned) {
      return absl::InternalError(absl::StrCat("PendingCommits has ",
                                              position.partition.ToString(),
                                              ", which is not assigned"));
    }
    absl::Status status = CheckCommit(*partition, position.offset, "PendingCommits");
    if (!status.ok()) return status;
  }
  engine_->MarkCommitted(positions);
  for (const CommitPosition& position : positions) {
    PartitionModel* partition = Find(position.partition.topic, position.partition.partition);
    partition->committed = position.offset;
    partition->last_committed_any = position.offset;
    // Committed offsets are settled: the model forgets them (a dispatch of
    // one later is reported as such).
    partition->offsets.erase(partition->offsets.begin(),
                             partition->offsets.lower_bound(position.offset));
  }
  return AfterStep();
}

absl::Status EngineModel::CheckCommit(const PartitionModel& partition, int64_t position,
                                      const char* where) const {
  const std::string what = absl::StrCat(where, ": commit position ", position, " of ",
                                        partition.tp.ToString());
  if (partition.max_submitted < 0) {
    return absl::InternalError(absl::StrCat(what, " while nothing was consumed in this assignment"));
  }
  if (position > partition.max_submitted + 1) {
    return absl::InternalError(absl::StrCat(what, " is past the last offset consumed (",
                                            partition.max_submitted, ")"));
  }
  if (partition.committed >= 0 && position < partition.committed) {
    return absl::InternalError(absl::StrCat(what, " went back from ", partition.committed));
  }
  for (const auto& [offset, model] : partition.offsets) {
    if (offset >= position) break;
    if (FateOf(model) == Fate::kUnfinished) {
      return absl::InternalError(absl::StrCat(what, " covers offset ", offset,
                                              ", which is not finished (", Describe(model), ")"));
    }
  }
  return absl::OkStatus();
}

std::string EngineModel::Describe(const OffsetModel& offset) const {
  if (offset.latest == 0) return "never dispatched";
  const Delivery& delivery = deliveries_.at(offset.latest);
  static constexpr const char* kStates[] = {"in flight", "waiting for redelivery", "answered",
                                            "unknown"};
  return absl::StrCat("delivery ", offset.latest, " attempt ", delivery.attempt, " on stream ",
                      delivery.stream, ": ", kStates[static_cast<int>(delivery.state)],
                      delivery.state == DeliveryState::kAnswered
                          ? absl::StrCat(" ", v1::Result::Status_Name(delivery.answer))
                          : std::string());
}

void EngineModel::DropPartitionDeliveries(int index) {
  for (auto& [offset, model] : partitions_[index].offsets) {
    if (model.latest == 0) continue;
    SetState(model.latest, deliveries_.at(model.latest), DeliveryState::kUnknown);
  }
}

void EngineModel::NewEpoch(PartitionModel& partition) {
  partition.epoch = next_epoch_++;
  partition.offsets.clear();
  partition.max_submitted = -1;
  partition.committed = -1;
}

}  // namespace ferry::fuzz
