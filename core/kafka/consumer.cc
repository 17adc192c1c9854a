#include "core/kafka/consumer.h"

#include <algorithm>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "core/common/kafka_status.h"
#include "core/common/log.h"
#include "core/kafka/command_applier.h"
#include "core/kafka/commit_queue.h"
#include "core/kafka/flow_control.h"
#include "core/kafka/rd_partition_list.h"
#include "core/kafka/rebalance.h"
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
      flow_(std::make_unique<FlowControl>(
          FlowControl::Budgets{[engine] { return engine->OverHighWatermark(); },
                               [engine] { return engine->UnderLowWatermark(); }},
          stats)),
      commands_(std::make_unique<CommandApplier>(engine, stats)),
      rebalancer_(std::make_unique<Rebalancer>(
          engine, stats, flow_.get(), commands_.get(), config.control_catch_up_timeout,
          Rebalancer::Hooks{[this](bool lost) { BeforeRebalance(lost); },
                            [this] { RefreshCommands(); }})),
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
  if (conf->set("rebalance_cb", self->rebalancer_.get(), error) != RdKafka::Conf::CONF_OK ||
      conf->set("event_cb", self->event_handler_.get(), error) != RdKafka::Conf::CONF_OK) {
    return absl::InternalError(absl::StrCat("cannot install librdkafka callbacks: ", error));
  }
  self->consumer_.reset(RdKafka::KafkaConsumer::create(conf.get(), error));
  if (self->consumer_ == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("cannot create Kafka consumer: ", error));
  }
  self->fetch_ = std::make_unique<RdFetchSwitch>(self->consumer_.get());
  return self;
}

KafkaConsumer::~KafkaConsumer() { Stop(); }

void KafkaConsumer::SetControlLog(ControlLog* control) { commands_->SetControlLog(control); }

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
        consumer_->consume(flow_->paused() ? kPausedPollTimeoutMs : kPollTimeoutMs));
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
  LeaveGroup();
}

void KafkaConsumer::LeaveGroup() {
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
  const uint64_t control_generation = commands_->Generation();
  if (blocked_generation != blocked_generation_ || control_generation != control_generation_) {
    blocked_generation_ = blocked_generation;
    control_generation_ = control_generation;
    RefreshCommands();
  }
  flow_->UpdateBudgets(*fetch_, rebalancer_->assignment(), stop_fetching_);
}

void KafkaConsumer::RefreshCommands() {
  // Held = blocked by a failure or paused by an operator: not fetched. The
  // holds are in force before the commands that assume them are applied.
  const std::vector<TopicPartition>& assignment = rebalancer_->assignment();
  flow_->UpdateHeld(*fetch_, engine_->BlockedPartitions(), commands_->OperatorPaused(assignment));
  commands_->Apply(*consumer_, assignment);
}

void KafkaConsumer::BeforeRebalance(bool assignment_lost) {
  // A lost assignment is acted on at once: the coordinator is unreachable or
  // has fenced this member, so commits in flight can only fail.
  if (!assignment_lost) AwaitCommitAnswers();
  FlushBatch();  // records read before the rebalance belong to the old assignment
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
