#include "core/kafka/consumer.h"

#include <algorithm>
#include <set>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "core/common/kafka_status.h"
#include "core/common/log.h"
#include "core/kafka/rd_partition_list.h"
#include "core/kafka/record.h"

namespace ferry {
namespace {

constexpr int kPollTimeoutMs = 100;
// While paused nothing arrives, so poll briefly to notice the drain soon.
constexpr int kPausedPollTimeoutMs = 10;
// At most this many records per round (one engine lock, one dispatch).
constexpr int64_t kMaxRoundRecords = 1024;
// Commit() gives up waiting after this (the commit stays in flight; the
// committer retries with newer positions).
constexpr absl::Duration kCommitAnswerWait = absl::Seconds(10);
// At shutdown, how long the poll thread waits for commits in flight.
constexpr absl::Duration kCommitDrainWait = absl::Seconds(5);

std::vector<TopicPartition> ToTopicPartitions(
    const std::vector<RdKafka::TopicPartition*>& partitions) {
  std::vector<TopicPartition> result;
  result.reserve(partitions.size());
  for (const RdKafka::TopicPartition* partition : partitions) {
    result.push_back({partition->topic(), partition->partition()});
  }
  return result;
}

std::string DescribePartitions(const std::vector<TopicPartition>& partitions) {
  std::string text;
  for (const TopicPartition& tp : partitions) {
    if (!text.empty()) text += ",";
    text += tp.ToString();
  }
  return text.empty() ? "(none)" : text;
}

RawRecord ToRawRecord(RdKafka::Message& message) {
  RawRecord record;
  record.topic = message.topic_name();
  record.partition = message.partition();
  record.offset = message.offset();
  if (message.key_pointer() != nullptr) {
    record.key.emplace(static_cast<const char*>(message.key_pointer()), message.key_len());
  }
  if (message.payload() != nullptr) {
    record.payload.assign(static_cast<const char*>(message.payload()), message.len());
  }
  if (RdKafka::Headers* headers = message.headers(); headers != nullptr) {
    for (const RdKafka::Headers::Header& header : headers->get_all()) {
      std::string value;
      if (header.value() != nullptr) {
        value.assign(static_cast<const char*>(header.value()), header.value_size());
      }
      record.headers.emplace_back(header.key(), std::move(value));
    }
  }
  const RdKafka::MessageTimestamp timestamp = message.timestamp();
  if (timestamp.type != RdKafka::MessageTimestamp::MSG_TIMESTAMP_NOT_AVAILABLE) {
    record.timestamp_ms = timestamp.timestamp;
  }
  return record;
}

}  // namespace

class KafkaConsumer::RebalanceHandler final : public RdKafka::RebalanceCb {
 public:
  explicit RebalanceHandler(KafkaConsumer* owner) : owner_(owner) {}
  void rebalance_cb(RdKafka::KafkaConsumer* consumer, RdKafka::ErrorCode error,
                    std::vector<RdKafka::TopicPartition*>& partitions) override {
    const bool incremental = consumer->rebalance_protocol() == "COOPERATIVE";
    if (error == RdKafka::ERR__ASSIGN_PARTITIONS) {
      owner_->OnAssign(partitions, incremental);
    } else {
      owner_->OnRevoke(partitions, incremental);
    }
  }

 private:
  KafkaConsumer* const owner_;
};

class KafkaConsumer::EventHandler final : public RdKafka::EventCb {
 public:
  explicit EventHandler(ConsumerStats* stats) : stats_(stats) {}
  void event_cb(RdKafka::Event& event) override {
    switch (event.type()) {
      case RdKafka::Event::EVENT_ERROR:
        if (stats_ != nullptr) stats_->ClientError();
        if (event.fatal()) {
          LogError("kafka", "fatal error: ", RdKafka::err2str(event.err()), ": ", event.str());
        } else {
          LogWarn("kafka", RdKafka::err2str(event.err()), ": ", event.str());
        }
        break;
      case RdKafka::Event::EVENT_LOG:
        if (event.severity() <= RdKafka::Event::EVENT_SEVERITY_WARNING) {
          LogWarn("kafka", event.fac(), ": ", event.str());
        } else {
          LogDebug("kafka", event.fac(), ": ", event.str());
        }
        break;
      default:
        break;
    }
  }

 private:
  ConsumerStats* const stats_;
};

KafkaConsumer::KafkaConsumer(const Config& config, Engine* engine, const Decoder* decoder,
                             ConsumerStats* stats)
    : config_(config),
      engine_(engine),
      decoder_(decoder),
      stats_(stats),
      rebalance_handler_(std::make_unique<RebalanceHandler>(this)),
      event_handler_(std::make_unique<EventHandler>(stats)) {}

absl::StatusOr<std::unique_ptr<KafkaConsumer>> KafkaConsumer::Create(const Config& config,
                                                                     Engine* engine,
                                                                     const Decoder* decoder,
                                                                     ConsumerStats* stats) {
  auto self =
      std::unique_ptr<KafkaConsumer>(new KafkaConsumer(config, engine, decoder, stats));
  std::unique_ptr<RdKafka::Conf> conf(RdKafka::Conf::create(RdKafka::Conf::CONF_GLOBAL));
  std::string error;
  // ferry's defaults; anything in the `kafka:` map overrides them, except the
  // commit settings, which are ferry's to own.
  std::map<std::string, std::string> properties = {
      {"auto.offset.reset", "earliest"},
      {"enable.partition.eof", "false"},
      {"client.id", "ferry"},
  };
  for (const auto& [name, value] : config.kafka) properties[name] = value;
  properties["enable.auto.commit"] = "false";
  properties["enable.auto.offset.store"] = "false";
  for (const auto& [name, value] : properties) {
    absl::Status set = KafkaConfResultToStatus(conf->set(name, value, error), error,
                                               absl::StrCat("kafka.", name), value);
    if (!set.ok()) return set;
  }
  if (conf->set("rebalance_cb", self->rebalance_handler_.get(), error) != RdKafka::Conf::CONF_OK ||
      conf->set("event_cb", self->event_handler_.get(), error) != RdKafka::Conf::CONF_OK) {
    return absl::InternalError(absl::StrCat("cannot install librdkafka callbacks: ", error));
  }
  self->consumer_.reset(RdKafka::KafkaConsumer::create(conf.get(), error));
  if (self->consumer_ == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("cannot create Kafka consumer: ", error));
  }
  return self;
}

KafkaConsumer::~KafkaConsumer() { Stop(); }

absl::Status KafkaConsumer::Start() {
  std::vector<std::string> topics;
  for (const TopicConfig& topic : config_.topics) topics.push_back(topic.name);
  absl::Status status = KafkaErrorToStatus(consumer_->subscribe(topics), "subscribe");
  if (!status.ok()) return status;
  started_ = true;
  poll_thread_ = std::thread([this] { PollLoop(); });
  return absl::OkStatus();
}

void KafkaConsumer::StopFetching() { stop_fetching_ = true; }

void KafkaConsumer::Stop() {
  if (stopped_) return;
  stopped_ = true;
  stop_ = true;
  if (poll_thread_.joinable()) poll_thread_.join();
  if (!started_ && consumer_ != nullptr) consumer_->close();
}

void KafkaConsumer::PollLoop() {
  poll_thread_id_ = std::this_thread::get_id();
  commit_queue_ = std::make_unique<CommitQueue>(consumer_->c_ptr());
  {
    absl::MutexLock lock(&commit_mu_);
    polling_ = true;
  }
  while (!stop_) {
    ServeCommitRequests();
    // One round: wait for a record, then take whatever else librdkafka has
    // ready without waiting, up to the engine's headroom (so a budget is
    // never overrun by more than the one record that crosses it).
    std::unique_ptr<RdKafka::Message> message(
        consumer_->consume(paused_ ? kPausedPollTimeoutMs : kPollTimeoutMs));
    if (message != nullptr && message->err() == RdKafka::ERR_NO_ERROR) {
      const Engine::Headroom room = engine_->Room();
      const int64_t limit = std::min(kMaxRoundRecords, std::max<int64_t>(1, room.events));
      HandleMessage(*message);
      while (static_cast<int64_t>(batch_.size()) < limit && batch_bytes_ < room.bytes &&
             !stop_) {
        message.reset(consumer_->consume(0));
        if (message == nullptr || message->err() == RdKafka::ERR__TIMED_OUT) break;
        HandleMessage(*message);
        if (message->err() != RdKafka::ERR_NO_ERROR) break;
      }
    } else if (message != nullptr) {
      HandleMessage(*message);
    }
    FlushBatch();
    UpdateFlowControl();
    commit_queue_->Serve();
  }
  ServeCommitRequests();
  {
    absl::MutexLock lock(&commit_mu_);
    polling_ = false;
  }
  ServeCommitRequests();  // fails whatever arrived meanwhile
  const absl::Time drain_deadline = absl::Now() + kCommitDrainWait;
  while (commit_queue_->outstanding() > 0 && absl::Now() < drain_deadline) {
    commit_queue_->Serve(absl::Milliseconds(100));
  }
  commit_queue_.reset();  // fails what is still unanswered
  const std::vector<CommitPosition> positions = engine_->PendingCommits();
  if (!positions.empty()) {
    absl::Status status = CommitOnPollThread(positions);
    if (status.ok()) {
      engine_->MarkCommitted(positions);
    } else {
      LogWarn("consumer", "final commit failed: ", status.ToString());
    }
  }
  // close() revokes the assignment through the rebalance callback (which
  // commits again if anything finished meanwhile) and leaves the group.
  const RdKafka::ErrorCode closed = consumer_->close();
  if (closed != RdKafka::ERR_NO_ERROR) {
    LogWarn("consumer", "close: ", RdKafka::err2str(closed));
  }
  LogInfo("consumer", "left the consumer group");
}

void KafkaConsumer::HandleMessage(RdKafka::Message& message) {
  switch (message.err()) {
    case RdKafka::ERR_NO_ERROR:
      break;
    case RdKafka::ERR__TIMED_OUT:
    case RdKafka::ERR__PARTITION_EOF:
      return;
    default:
      if (stats_ != nullptr) stats_->ConsumeError();
      LogWarn("consumer", "consume error: ", message.errstr());
      return;
  }
  RawRecord record = ToRawRecord(message);
  const int64_t bytes = record.ByteSize();
  if (bytes > config_.max_event_bytes) {
    FlushBatch();
    engine_->SubmitPoison(record, absl::StrCat("record of ", bytes,
                                               " bytes is over failures.max_event_bytes (",
                                               config_.max_event_bytes, ")"));
    return;
  }
  // Moves the payload, topic and headers into the event; on an error the
  // record is whole, and the record key is never taken.
  absl::StatusOr<v1::Event> event = decoder_->Decode(std::move(record));
  if (!event.ok()) {
    FlushBatch();
    engine_->SubmitPoison(record, std::string(event.status().message()));
    return;
  }
  batch_.push_back({*std::move(event), bytes, std::move(record.key)});
  batch_bytes_ += bytes;
}

void KafkaConsumer::FlushBatch() {
  if (batch_.empty()) return;
  engine_->SubmitBatch(batch_);
  batch_.clear();
  batch_bytes_ = 0;
}

void KafkaConsumer::UpdateFlowControl() {
  const uint64_t blocked_generation = engine_->BlockedGeneration();
  const uint64_t control_generation = control_ != nullptr ? control_->Generation() : 0;
  if (blocked_generation != blocked_generation_ || control_generation != control_generation_) {
    blocked_generation_ = blocked_generation;
    control_generation_ = control_generation;
    UpdateHeld();
    ApplyControlCommands();
  }
  if (stop_fetching_) {
    if (!paused_) {
      LogInfo("consumer", "stopped fetching; draining in-flight events");
      PauseAll();
    }
    return;
  }
  if (!paused_ && engine_->OverHighWatermark()) {
    LogDebug("consumer", "buffers full: pausing fetch");
    if (stats_ != nullptr) stats_->BackpressurePause();
    PauseAll();
  } else if (paused_ && engine_->UnderLowWatermark()) {
    LogDebug("consumer", "buffers drained: resuming fetch");
    ResumeAll();
  }
}

void KafkaConsumer::UpdateHeld() {
  // Held = blocked by a failure or paused by an operator: not fetched.
  std::set<TopicPartition> held;
  std::vector<TopicPartition> blocked = engine_->BlockedPartitions();
  for (const TopicPartition& tp : blocked) held.insert(tp);
  if (control_ != nullptr) {
    const std::set<TopicPartition> paused = control_->Paused(assignment_);
    if (paused != operator_paused_) {
      std::vector<TopicPartition> newly;
      for (const TopicPartition& tp : paused) {
        if (operator_paused_.count(tp) == 0) newly.push_back(tp);
      }
      if (!newly.empty()) LogInfo("consumer", "paused by operator: ", DescribePartitions(newly));
      operator_paused_ = paused;
      engine_->SetPaused(operator_paused_);
    }
    held.insert(operator_paused_.begin(), operator_paused_.end());
  }
  std::vector<TopicPartition> newly_held;
  std::vector<TopicPartition> released;
  for (const TopicPartition& tp : held) {
    if (held_.count(tp) == 0) newly_held.push_back(tp);
  }
  for (const TopicPartition& tp : held_) {
    if (held.count(tp) == 0) released.push_back(tp);
  }
  held_.swap(held);
  PublishPauseState();
  if (!newly_held.empty()) {
    RdPartitionList list(newly_held);
    consumer_->pause(list.get());
    std::vector<TopicPartition> newly_blocked;
    for (const TopicPartition& tp : newly_held) {
      if (std::find(blocked.begin(), blocked.end(), tp) != blocked.end()) {
        newly_blocked.push_back(tp);
      }
    }
    if (!newly_blocked.empty()) {
      LogWarn("consumer", "paused blocked partitions: ", DescribePartitions(newly_blocked));
    }
  }
  if (!released.empty() && !paused_) {
    RdPartitionList list(released);
    consumer_->resume(list.get());
    LogInfo("consumer", "resumed released partitions: ", DescribePartitions(released));
  }
}

void KafkaConsumer::ReportReset(const ControlLog::PendingReset& reset, const absl::Status& status) {
  if (stats_ != nullptr) stats_->Commit(status.ok());
  v1::internal::CommandResult result;
  result.set_command_id(reset.command_id);
  result.set_topic(reset.partition.topic);
  result.set_partition(reset.partition.partition);
  result.set_ok(status.ok());
  if (status.ok()) {
    LogInfo("consumer", "reset ", reset.partition.ToString(), " to offset ", reset.offset,
            " (command ", reset.command_id, ")");
  } else {
    result.set_error(std::string(status.message()));
    LogError("consumer", "reset ", reset.partition.ToString(), " to ", reset.offset,
             " failed: ", status.ToString());
  }
  absl::Status reported = control_->ReportResult(std::move(result));
  if (!reported.ok()) {
    LogWarn("consumer", "could not record the reset result: ", reported.ToString());
  }
}

void KafkaConsumer::ApplyControlCommands() {
  if (control_ == nullptr || assignment_.empty()) return;
  // UpdateHeld ran first: pauses and resumes read so far are in force here.
  std::vector<v1::internal::CommandResult> acks;
  for (const ControlLog::PendingAck& pending : control_->PendingPauseAcks(assignment_)) {
    v1::internal::CommandResult ack;
    ack.set_command_id(pending.command_id);
    ack.set_topic(pending.partition.topic);
    ack.set_partition(pending.partition.partition);
    ack.set_ok(true);
    acks.push_back(std::move(ack));
  }
  if (absl::Status acked = control_->ReportResults(std::move(acks)); !acked.ok()) {
    LogWarn("consumer", "could not acknowledge a pause/resume: ", acked.ToString());
  }
  for (const ControlLog::PendingReset& reset : control_->PendingResets(assignment_)) {
    // Drop the partition's work (new epoch: late results are stale), move
    // the fetch position, then commit it so the group agrees even if this
    // replica dies before committing anything else.
    engine_->ResetPartition(reset.partition);
    std::unique_ptr<RdKafka::TopicPartition> target(RdKafka::TopicPartition::create(
        reset.partition.topic, reset.partition.partition, reset.offset));
    absl::Status status = KafkaErrorToStatus(consumer_->seek(*target, 10000), "seek");
    if (status.ok()) {
      std::vector<RdKafka::TopicPartition*> list{target.get()};
      status = KafkaErrorToStatus(consumer_->commitSync(list), "commit");
    }
    ReportReset(reset, status);
  }
  for (const ControlLog::PendingSkip& skip : control_->PendingSkips(assignment_)) {
    v1::internal::CommandResult result;
    result.set_command_id(skip.command_id);
    result.set_topic(skip.partition.topic);
    result.set_partition(skip.partition.partition);
    absl::StatusOr<std::string> outcome = engine_->SkipOffset(skip.partition, skip.offset);
    result.set_ok(outcome.ok());
    if (outcome.ok()) {
      result.set_outcome(*outcome);
    } else {
      result.set_error(std::string(outcome.status().message()));
    }
    absl::Status reported = control_->ReportResult(std::move(result));
    if (!reported.ok()) {
      LogWarn("consumer", "could not record the skip result: ", reported.ToString());
    }
  }
}

void KafkaConsumer::PublishPauseState() {
  absl::MutexLock lock(&assignment_mu_);
  paused_copy_ = paused_;
  held_copy_ = held_;
}

void KafkaConsumer::PauseAll() {
  paused_ = true;
  PublishPauseState();
  if (assignment_.empty()) return;
  RdPartitionList list(assignment_);
  const RdKafka::ErrorCode error = consumer_->pause(list.get());
  if (error != RdKafka::ERR_NO_ERROR) {
    LogWarn("consumer", "pause: ", RdKafka::err2str(error));
  }
}

void KafkaConsumer::ResumeAll() {
  paused_ = false;
  PublishPauseState();
  std::vector<TopicPartition> resumable;
  for (const TopicPartition& tp : assignment_) {
    if (held_.count(tp) == 0) resumable.push_back(tp);
  }
  if (resumable.empty()) return;
  RdPartitionList list(resumable);
  const RdKafka::ErrorCode error = consumer_->resume(list.get());
  if (error != RdKafka::ERR_NO_ERROR) {
    LogWarn("consumer", "resume: ", RdKafka::err2str(error));
  }
}

void KafkaConsumer::AwaitCommitAnswers() {
  // As when commits were synchronous, a commit sent before a rebalance is
  // answered before the rebalance goes on: sent in one generation and
  // answered in the next, the coordinator would refuse it as stale, and
  // librdkafka would take that for this member being fenced (assignment
  // lost). Bounded: past the wait the rebalance goes on regardless.
  const absl::Time deadline = absl::Now() + kCommitAnswerWait;
  while (commit_queue_ != nullptr && commit_queue_->outstanding() > 0 &&
         absl::Now() < deadline) {
    commit_queue_->Serve(absl::Milliseconds(100));
  }
}

void KafkaConsumer::OnAssign(const std::vector<RdKafka::TopicPartition*>& partitions,
                             bool incremental) {
  AwaitCommitAnswers();
  FlushBatch();  // records read before the rebalance belong to the old assignment
  const std::vector<TopicPartition> assigned = ToTopicPartitions(partitions);
  if (stats_ != nullptr) stats_->Assigned();
  engine_->OnAssigned(assigned);
  // Read every operator command issued so far before fetching: a partition
  // paused or reset elsewhere must not run on from its old state here. A
  // pending reset becomes the partition's start offset.
  std::vector<ControlLog::PendingReset> resets;
  if (control_ != nullptr) {
    absl::Status caught_up = control_->CatchUp(config_.control_catch_up_timeout);
    if (!caught_up.ok()) {
      LogWarn("consumer", "control topic not read to its end (", caught_up.ToString(),
              "); commands issued meanwhile apply when they are read");
    }
    resets = control_->PendingResets(assigned);
    for (const ControlLog::PendingReset& reset : resets) {
      for (RdKafka::TopicPartition* partition : partitions) {
        if (partition->topic() == reset.partition.topic &&
            partition->partition() == reset.partition.partition) {
          partition->set_offset(reset.offset);
        }
      }
    }
  }
  RdKafka::Error* error = nullptr;
  RdKafka::ErrorCode code = RdKafka::ERR_NO_ERROR;
  if (incremental) {
    error = consumer_->incremental_assign(partitions);
  } else {
    code = consumer_->assign(partitions);
  }
  if (error != nullptr) {
    LogError("consumer", "incremental assign failed: ", error->str());
    delete error;
  } else if (code != RdKafka::ERR_NO_ERROR) {
    LogError("consumer", "assign failed: ", RdKafka::err2str(code));
  }
  if (!incremental) assignment_.clear();
  assignment_.insert(assignment_.end(), assigned.begin(), assigned.end());
  // librdkafka remembers a pause per partition across unassign/assign, so a
  // partition paused before a rebalance would come back paused: always set
  // the state this process wants now.
  {
    RdPartitionList list(assigned);
    if (paused_) {
      consumer_->pause(list.get());
    } else {
      consumer_->resume(list.get());
    }
  }
  {
    absl::MutexLock lock(&assignment_mu_);
    assignment_copy_ = assignment_;
  }
  LogInfo("consumer", "assigned: ", DescribePartitions(assigned));
  if (control_ != nullptr) {
    for (const ControlLog::PendingReset& reset : resets) {
      std::unique_ptr<RdKafka::TopicPartition> target(RdKafka::TopicPartition::create(
          reset.partition.topic, reset.partition.partition, reset.offset));
      std::vector<RdKafka::TopicPartition*> list{target.get()};
      absl::Status status = KafkaErrorToStatus(consumer_->commitSync(list), "commit");
      ReportReset(reset, status);
    }
    // The new partitions were just resumed above; UpdateHeld pauses the
    // held ones among them again.
    for (const TopicPartition& tp : assigned) held_.erase(tp);
    UpdateHeld();
    ApplyControlCommands();
  }
}

void KafkaConsumer::OnRevoke(const std::vector<RdKafka::TopicPartition*>& partitions,
                             bool incremental) {
  // A lost assignment is acted on at once: the coordinator is unreachable or
  // has fenced this member, so commits in flight can only fail.
  if (!consumer_->assignment_lost()) AwaitCommitAnswers();
  FlushBatch();  // records read before the rebalance belong to the old assignment
  const std::vector<TopicPartition> revoked = ToTopicPartitions(partitions);
  const std::vector<CommitPosition> positions = engine_->OnRevoked(revoked);
  if (stats_ != nullptr) stats_->Revoked(consumer_->assignment_lost());
  if (consumer_->assignment_lost()) {
    LogWarn("consumer", "assignment lost (", DescribePartitions(revoked),
            "); not committing, the new owner re-delivers unfinished events");
  } else if (!positions.empty()) {
    // These positions were computed just now, in this callback, for the
    // partitions being revoked (the engine has already forgotten them, so
    // CommitOnPollThread's still-current check would drop them all).
    RdPartitionList list(positions);
    absl::Status status = KafkaErrorToStatus(consumer_->commitSync(list.get()), "commit on revoke");
    if (stats_ != nullptr) stats_->Commit(status.ok());
    if (!status.ok()) LogWarn("consumer", "commit on revoke failed: ", status.ToString());
  }
  if (incremental) {
    RdKafka::Error* error = consumer_->incremental_unassign(partitions);
    if (error != nullptr) {
      LogError("consumer", "incremental unassign failed: ", error->str());
      delete error;
    }
  } else {
    consumer_->unassign();
  }
  std::vector<TopicPartition> kept;
  for (const TopicPartition& tp : assignment_) {
    bool gone = false;
    for (const TopicPartition& r : revoked) gone = gone || r == tp;
    if (!gone) kept.push_back(tp);
  }
  assignment_.swap(kept);
  for (const TopicPartition& tp : revoked) {
    held_.erase(tp);
    operator_paused_.erase(tp);
  }
  {
    absl::MutexLock lock(&assignment_mu_);
    assignment_copy_ = assignment_;
    held_copy_ = held_;
  }
  LogInfo("consumer", "revoked: ", DescribePartitions(revoked));
}

absl::Status KafkaConsumer::Commit(const std::vector<CommitPosition>& positions) {
  if (positions.empty()) return absl::OkStatus();
  if (std::this_thread::get_id() == poll_thread_id_) return CommitOnPollThread(positions);
  auto request = std::make_shared<CommitRequest>();
  request->positions = positions;
  {
    absl::MutexLock lock(&commit_mu_);
    if (!polling_) return absl::FailedPreconditionError("the consumer is not polling");
    commit_requests_.push_back(request);
  }
  consumer_->yield();  // wake consume() so the poll thread serves it now
  if (!request->done.WaitForNotificationWithTimeout(kCommitAnswerWait)) {
    return absl::DeadlineExceededError(
        absl::StrCat("commit not answered within ", absl::FormatDuration(kCommitAnswerWait),
                     " (group coordinator unreachable?); it stays in flight"));
  }
  return request->status;
}

void KafkaConsumer::ServeCommitRequests() {
  std::vector<std::shared_ptr<CommitRequest>> requests;
  bool polling;
  {
    absl::MutexLock lock(&commit_mu_);
    requests.swap(commit_requests_);
    polling = polling_;
  }
  for (const std::shared_ptr<CommitRequest>& request : requests) {
    const std::vector<CommitPosition> current =
        polling ? engine_->StillCurrent(request->positions) : std::vector<CommitPosition>();
    if (current.empty()) {
      request->status =
          polling ? absl::OkStatus() : absl::FailedPreconditionError("the consumer stopped polling");
      request->done.Notify();
      continue;
    }
    commit_queue_->Send(current, [this, request](const absl::Status& status) {
      if (stats_ != nullptr) stats_->Commit(status.ok());
      request->status = status;
      request->done.Notify();
    });
  }
}

absl::Status KafkaConsumer::CommitOnPollThread(const std::vector<CommitPosition>& positions) {
  const std::vector<CommitPosition> current = engine_->StillCurrent(positions);
  if (current.empty()) return absl::OkStatus();
  RdPartitionList list(current);
  absl::Status status = KafkaErrorToStatus(consumer_->commitSync(list.get()), "commit");
  if (stats_ != nullptr) stats_->Commit(status.ok());
  return status;
}

}  // namespace ferry
