#include "tests/mocks/engine_fixtures.h"

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"

namespace ferry::testing {

Config OneProcessorConfig() {
  Config config;
  config.topics.push_back(TopicConfig{"t", Ordering::kKey, {}, {}});
  ProcessorConfig processor;
  processor.name = "p";
  processor.target = "ipv4:127.0.0.1:1";
  config.processors.push_back(processor);
  return config;
}

Config EngineTestConfig(FailurePolicy on_failure) {
  Config config = OneProcessorConfig();
  ProcessorConfig& processor = config.processors[0];
  processor.max_in_flight = 1000;
  processor.max_batch = 64;
  processor.timeout = absl::Seconds(10);
  processor.max_attempts = 3;
  processor.retry_backoff = absl::Milliseconds(100);
  processor.retry_backoff_max = absl::Seconds(1);
  config.lane_count = 16;
  config.lane_capacity = 100;
  config.max_buffered_events = 1000;
  config.on_failure = on_failure;
  if (on_failure == FailurePolicy::kDeadLetter) config.dead_letter_topic = "dlq";
  return config;
}

v1::Event MakeEvent(const TopicPartition& tp, int64_t offset, const std::string& key,
                    const std::string& type) {
  v1::Event event;
  event.set_topic(tp.topic);
  event.set_partition(tp.partition);
  event.set_offset(offset);
  event.set_key(key);
  event.set_type(type);
  return event;
}

v1::Event MakeEvent(int32_t partition, int64_t offset, const std::string& key,
                    const std::string& type) {
  return MakeEvent(TopicPartition{"t", partition}, offset, key, type);
}

Engine::SubmitItem SubmitItemOf(v1::Event event, int64_t bytes) {
  return Engine::SubmitItem{std::make_unique<v1::Event>(std::move(event)), bytes, std::nullopt};
}

v1::Results ResultFor(uint64_t id, v1::Result::Status status, const std::string& message) {
  v1::Results results;
  v1::Result* result = results.add_results();
  result->set_id(id);
  result->set_status(status);
  result->set_message(message);
  return results;
}

std::vector<int64_t> Offsets(const std::vector<v1::Event>& events) {
  std::vector<int64_t> offsets;
  for (const v1::Event& event : events) offsets.push_back(event.offset());
  return offsets;
}

int64_t Connect(Engine& engine, WorkerStream& stream, uint32_t credit, int processor,
                uint32_t max_run) {
  const int64_t id = engine.AddStream(processor, &stream);
  engine.OnReady(id, credit, "", max_run);
  return id;
}

v1::Results ResultsFor(const std::vector<std::pair<uint64_t, v1::Result::Status>>& results) {
  v1::Results message;
  for (const auto& [id, status] : results) {
    v1::Result* result = message.add_results();
    result->set_id(id);
    result->set_status(status);
  }
  return message;
}

std::optional<int64_t> CommitOffset(const Engine& engine, const TopicPartition& tp) {
  for (const CommitPosition& position : engine.PendingCommits()) {
    if (position.partition == tp) return position.offset;
  }
  return std::nullopt;
}

std::optional<int64_t> CommitOffset(const Engine& engine, int32_t partition) {
  return CommitOffset(engine, TopicPartition{"t", partition});
}

void AckAll(Engine& engine, int64_t stream_id, FakeWorkerStream& stream) {
  for (const v1::Event& event : stream.TakeHeld()) {
    engine.OnResults(stream_id, ResultFor(event.id(), v1::Result::OK));
  }
}

v1::internal::ControlLogRecord RateLimitRecord(const std::string& processor,
                                               double events_per_second, int64_t burst,
                                               bool clear) {
  v1::internal::ControlLogRecord record;
  v1::internal::RateLimitChange* change = record.mutable_rate_limit();
  change->set_processor(processor);
  change->set_events_per_second(events_per_second);
  change->set_burst(burst);
  change->set_clear(clear);
  return record;
}

std::vector<std::string> RateLimitsText(const std::map<std::string, RateLimitConfig>& limits) {
  std::vector<std::string> text;
  for (const auto& [processor, limit] : limits) {
    text.push_back(absl::StrCat(processor, ": ", limit.events_per_second, "/", limit.burst));
  }
  return text;
}

}  // namespace ferry::testing
