#include "core/kafka/consumer.h"

#include <librdkafka/rdkafka.h>

#include <algorithm>
#include <array>
#include <memory>
#include <string>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "core/common/clock.h"
#include "core/common/kafka_status.h"
#include "core/common/log.h"
#include "core/engine/event_prefetch.h"
#include "core/kafka/command_applier.h"
#include "core/kafka/commit_queue.h"
#include "core/kafka/flow_control.h"
#include "core/kafka/rd_partition_list.h"
#include "core/kafka/rebalance.h"
#include "core/kafka/record.h"

namespace ferry {
namespace {

constexpr int kPollTimeoutMs = 100;
// While paused nothing arrives, so poll briefly to notice the drain soon; while
// holding records back, wait that long for the drain between rounds.
constexpr int kPausedPollTimeoutMs = 10;
// max.poll.interval.ms as librdkafka gets it (its default: 5 minutes): the
// poll loop must poll within it, holding records back or not.
absl::Duration MaxPollInterval(const Config& config) {
  int64_t ms = 300000;
  const auto it = config.kafka.find("max.poll.interval.ms");
  if (it != config.kafka.end()) (void)absl::SimpleAtoi(it->second, &ms);
  return absl::Milliseconds(ms);
}
// At most this many records per round (one engine lock, one dispatch).
constexpr int64_t kMaxRoundRecords = 1024;
// Records read off librdkafka's queue in one call within a round.
constexpr int64_t kReadSlice = 64;
// Commit() gives up waiting after this (the commit stays in flight; the
// committer retries with newer positions).
constexpr absl::Duration kCommitAnswerWait = absl::Seconds(10);
// At shutdown, how long the poll thread waits for commits in flight.
constexpr absl::Duration kCommitDrainWait = absl::Seconds(5);

// Fills `record` from a librdkafka message (read through the C API: the C++
// wrapper would allocate a Message object per record, a std::string for the
// topic name and copies of every header).
void FillRawRecord(const rd_kafka_message_t& message, RawRecord* record) {
  record->topic.assign(rd_kafka_topic_name(message.rkt));
  record->partition = message.partition;
  record->offset = message.offset;
  if (message.key != nullptr) {
    record->key.emplace(static_cast<const char*>(message.key), message.key_len);
  } else {
    record->key.reset();
  }
  if (message.payload != nullptr) {
    record->payload.assign(static_cast<const char*>(message.payload), message.len);
  } else {
    record->payload.clear();
  }
  record->headers.clear();
  rd_kafka_headers_t* headers = nullptr;
  if (rd_kafka_message_headers(&message, &headers) == RD_KAFKA_RESP_ERR_NO_ERROR &&
      headers != nullptr) {
    const char* name = nullptr;
    const void* value = nullptr;
    size_t size = 0;
    for (size_t i = 0;
         rd_kafka_header_get_all(headers, i, &name, &value, &size) == RD_KAFKA_RESP_ERR_NO_ERROR;
         ++i) {
      record->headers.emplace_back(
          name, value != nullptr ? std::string(static_cast<const char*>(value), size)
                                 : std::string());
    }
  }
  rd_kafka_timestamp_type_t type = RD_KAFKA_TIMESTAMP_NOT_AVAILABLE;
  const int64_t timestamp = rd_kafka_message_timestamp(&message, &type);
  record->timestamp_ms = type != RD_KAFKA_TIMESTAMP_NOT_AVAILABLE ? timestamp : 0;
}

struct MessageDestroyer {
  void operator()(rd_kafka_message_t* message) const { rd_kafka_message_destroy(message); }
};
// A polled message (null: nothing arrived in time).
using PolledMessage = std::unique_ptr<rd_kafka_message_t, MessageDestroyer>;

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
          stats, RealClock::Get(), FlowControl::HoldLimit(MaxPollInterval(config)))),
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
  for (const auto& [name, value] : Properties(config)) {
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

std::map<std::string, std::string> KafkaConsumer::Properties(const Config& config) {
  // ferry's defaults; anything in the `kafka:` map overrides them, except the
  // commit settings, which are ferry's to own.
  std::map<std::string, std::string> properties = {
      {"auto.offset.reset", "earliest"},
      {"enable.partition.eof", "false"},
      {"client.id", "ferry"},
      // librdkafka's default (1000 ms) makes the fetcher wait that long
      // before it fetches again once its queue reached the
      // queued.min.messages threshold: a consumer slower than the fetcher
      // then finds the queue empty and idles (a bare consumer read 239k
      // events/s with the default and 755k with 10 ms on the benchmark).
      {"fetch.queue.backoff.ms", "10"},
  };
  for (const auto& [name, value] : config.kafka) properties[name] = value;
  properties["enable.auto.commit"] = "false";
  properties["enable.auto.offset.store"] = "false";
  return properties;
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
  batch_.reserve(kMaxRoundRecords);  // HandleMessage decodes in place: never regrown
  commit_queue_ = std::make_unique<CommitQueue>(consumer_->c_ptr());
  consumer_queue_.reset(rd_kafka_queue_get_consumer(consumer_->c_ptr()));
  {
    absl::MutexLock lock(&commit_mu_);
    polling_ = true;
  }
  while (!stop_) {
    ServeCommitRequests();
    if (flow_->holding()) {
      // Buffers full: nothing is taken until they drain. librdkafka keeps
      // fetching into its own bounded queue, which the next round reads at
      // once (core/kafka/flow_control.h).
      (void)engine_->AwaitUnderLowWatermark(absl::Milliseconds(kPausedPollTimeoutMs));
    } else {
      TakeRecords();
    }
    FlushBatch();
    UpdateFlowControl();
    commit_queue_->Serve();
  }
  LeaveGroup();
  consumer_queue_.reset();
}

void KafkaConsumer::TakeRecords() {
  // One round: wait for a record, then take whatever else librdkafka has
  // ready without waiting, up to the engine's headroom (so a budget is
  // never overrun by more than the one record that crosses it).
  // The C API's poll is what RdKafka::KafkaConsumer::consume() wraps.
  PolledMessage message(rd_kafka_consumer_poll(
      consumer_->c_ptr(), flow_->paused() ? kPausedPollTimeoutMs : kPollTimeoutMs));
  if (message == nullptr) return;
  if (message->err != RD_KAFKA_RESP_ERR_NO_ERROR) {
    HandleMessage(*message);
    return;
  }
  const Engine::Headroom room = engine_->Room();
  const int64_t limit = std::min(kMaxRoundRecords, std::max<int64_t>(1, room.events));
  HandleMessage(*message);
  message.reset();
  // The rest comes off librdkafka's queue in slices: one queue lock, one
  // clock reading and one max.poll.interval.ms check per slice instead of per
  // record. A slice is what the byte headroom is estimated to still hold, so
  // the byte budget is overrun by at most about one record, as before.
  std::array<rd_kafka_message_t*, kReadSlice> slice;
  while (consumer_queue_ != nullptr && static_cast<int64_t>(batch_.size()) < limit &&
         batch_bytes_ < room.bytes && !stop_) {
    const int64_t taken = static_cast<int64_t>(batch_.size());
    const int64_t mean_bytes = std::max<int64_t>(1, batch_bytes_ / std::max<int64_t>(1, taken));
    const int64_t fit = (room.bytes - batch_bytes_ + mean_bytes - 1) / mean_bytes;
    const int64_t want = std::min({kReadSlice, limit - taken, std::max<int64_t>(1, fit)});
    const ssize_t got = rd_kafka_consume_batch_queue(consumer_queue_.get(), 0, slice.data(),
                                                     static_cast<size_t>(want));
    if (got <= 0) break;
    // Every message taken is handled, an error among them or not: what is
    // taken off the queue is not given back.
    bool error = false;
    for (ssize_t i = 0; i < got; ++i) {
      PolledMessage taken_message(slice[static_cast<size_t>(i)]);
      HandleMessage(*taken_message);
      error = error || taken_message->err != RD_KAFKA_RESP_ERR_NO_ERROR;
    }
    if (error || got < want) break;
  }
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

void KafkaConsumer::HandleMessage(const rd_kafka_message_t& message) {
  switch (message.err) {
    case RD_KAFKA_RESP_ERR_NO_ERROR:
      break;
    case RD_KAFKA_RESP_ERR__TIMED_OUT:
    case RD_KAFKA_RESP_ERR__PARTITION_EOF:
      return;
    default:
      if (stats_ != nullptr) stats_->ConsumeError();
      LogWarn("consumer", "consume error: ", rd_kafka_message_errstr(&message));
      return;
  }
  // record_ is scratch kept across records, so its string buffers are reused
  // where the event does not take them.
  RawRecord& record = record_;
  FillRawRecord(message, &record);
  const int64_t bytes = record.ByteSize();
  if (bytes > config_.max_event_bytes) {
    FlushBatch();
    engine_->SubmitPoison(record, absl::StrCat("record of ", bytes,
                                               " bytes is over failures.max_event_bytes (",
                                               config_.max_event_bytes, ")"));
    return;
  }
  // Decoded in place in the batch. Moves the payload, topic and headers into
  // the event; on an error the record is whole, and the record key is never
  // taken.
  Engine::SubmitItem& item = batch_.emplace_back();
  // A finished Event the engine handed back, whose string buffers the
  // decoder reuses (core/engine/event_pool.h), or a new one.
  if (spare_events_.empty()) {
    item.event = std::make_unique<v1::Event>();
  } else {
    PrefetchSpares();
    item.event = std::move(spare_events_.back());
    spare_events_.pop_back();
  }
  const absl::Status decoded = decoder_->DecodeInto(record, item.event.get());
  if (!decoded.ok()) {
    batch_.pop_back();
    FlushBatch();
    engine_->SubmitPoison(record, std::string(decoded.message()));
    return;
  }
  item.bytes = bytes;
  item.record_key = std::move(record.key);
  batch_bytes_ += bytes;
}

void KafkaConsumer::PrefetchSpares() const {
  // Spares are taken from the back. A spare's Event went cold while it was
  // out at a worker, and decoding into it waits on three dependent misses
  // (the Event, its string objects, their bytes). Asked for a few records
  // ahead, level by level, they overlap with decoding the records between.
  constexpr size_t kEventAhead = 6;
  constexpr size_t kStringsAhead = 3;
  constexpr size_t kBytesAhead = 1;
  const size_t n = spare_events_.size();
  if (n > kEventAhead) PrefetchEvent(*spare_events_[n - 1 - kEventAhead]);
  if (n > kStringsAhead) PrefetchEventStrings(*spare_events_[n - 1 - kStringsAhead]);
  // Decoding clears each string (writing its first byte) and swaps the
  // payload's buffer into record_, where the next record is copied.
  if (n > kBytesAhead) PrefetchEventBytes(*spare_events_[n - 1 - kBytesAhead], 1);
}

void KafkaConsumer::FlushBatch() {
  if (batch_.empty()) return;
  engine_->SubmitBatch(batch_, &spare_events_);
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
