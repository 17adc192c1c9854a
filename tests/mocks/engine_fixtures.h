// Shared set-up for the engine's unit tests (core/engine/engine_*_test.cc,
// core/engine/committer_test.cc): the base test Config, Events and Results built by
// hand, small queries on an Engine, and EngineHarness, the fake clock, fake
// dead-letter writer and Engine every one of those tests builds. One copy here
// instead of one per test file; a test that needs a different config changes
// the fields it cares about on the returned Config, in the test file, where the
// reader sees it. Only Engine's public API is used.
//
// Also the operators' rate limits on their way to the engine: the control-log
// record that sets one and the text form of the set the engine is told
// (core/control/control_state_test.cc, core/kafka/command_applier_test.cc).
//
// Threading: an EngineHarness and an Engine passed in are used from the calling
// (test) thread only, as the tests drive them; the functions have no state.
#ifndef FERRY_TESTS_MOCKS_ENGINE_FIXTURES_H_
#define FERRY_TESTS_MOCKS_ENGINE_FIXTURES_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/config/config.h"
#include "core/engine/engine.h"
#include "core/engine/worker_stream.h"
#include "ferry/v1/control_log.pb.h"
#include "ferry/v1/processor.pb.h"
#include "tests/mocks/fake_clock.h"
#include "tests/mocks/fake_dead_letter_writer.h"
#include "tests/mocks/fake_worker_stream.h"

namespace ferry::testing {

// Topic "t" (KEY-ordered) and processor "p" at an unreachable target, every
// other field at its default.
Config OneProcessorConfig();

// OneProcessorConfig() with limits small enough to reason about in a test:
// "p" takes 1000 in flight, batches of 64, times out after 10s, makes 3
// attempts with 100ms..1s backoff; 16 lanes of 100, 1000 events buffered.
// `on_failure` is the failure policy; under kDeadLetter the dead-letter topic
// is "dlq", otherwise none is set.
Config EngineTestConfig(FailurePolicy on_failure = FailurePolicy::kSkip);

// An Event of topic "t" (or `tp.topic`) with the given position, key and type.
v1::Event MakeEvent(int32_t partition, int64_t offset, const std::string& key,
                    const std::string& type = "t");
v1::Event MakeEvent(const TopicPartition& tp, int64_t offset, const std::string& key,
                    const std::string& type = "t");

// One consume batch's item (Engine::SubmitBatch) of `event` weighing `bytes`.
Engine::SubmitItem SubmitItemOf(v1::Event event, int64_t bytes);

// A Results message with one result for event `id`.
v1::Results ResultFor(uint64_t id, v1::Result::Status status, const std::string& message = "");

// The offsets of `events`, in order.
std::vector<int64_t> Offsets(const std::vector<v1::Event>& events);

// Adds `stream` to processor `processor` of `engine` and makes it Ready with
// `credit` (and Ready.max_run = `max_run`: above 1 it takes runs); returns its
// stream id.
int64_t Connect(Engine& engine, WorkerStream& stream, uint32_t credit, int processor = 0,
                uint32_t max_run = 0);

// A Results message with one result per (id, status), in that order.
v1::Results ResultsFor(const std::vector<std::pair<uint64_t, v1::Result::Status>>& results);

// The offset `engine` would commit for `tp` (or partition `partition` of
// topic "t"); nullopt if nothing is pending there.
std::optional<int64_t> CommitOffset(const Engine& engine, const TopicPartition& tp);
std::optional<int64_t> CommitOffset(const Engine& engine, int32_t partition = 0);

// Acknowledges OK every event `stream` (stream id `stream_id` of `engine`)
// holds, taking them from it.
void AckAll(Engine& engine, int64_t stream_id, FakeWorkerStream& stream);

// A control-log record that sets `processor`'s rate limit (`clear`: back to
// its configured limit), with no command id.
v1::internal::ControlLogRecord RateLimitRecord(const std::string& processor,
                                               double events_per_second, int64_t burst = 0,
                                               bool clear = false);

// `limits` (a processor's name to its limit, as Engine::SetRateLimits takes
// them) as "processor: rate/burst" in name order: RateLimitConfig has no ==.
std::vector<std::string> RateLimitsText(const std::map<std::string, RateLimitConfig>& limits);

// The fake clock, fake dead-letter writer and Engine of an engine test. Use it
// as a member, or as a second base of a gtest fixture so a test reads
// `engine_->Submit(...)`, `clock_.Advance(...)`, `writer_.Complete()`.
class EngineHarness {
 public:
  // Whether the engine gets `writer_` or no dead-letter writer at all.
  enum class DeadLetters { kFakeWriter, kNone };

  // Partitions 0 and 1 of topic "t".
  static std::vector<TopicPartition> TwoPartitions() { return {{"t", 0}, {"t", 1}}; }

  // No engine until Start.
  EngineHarness() = default;
  // Starts at once (see Start).
  explicit EngineHarness(const Config& config,
                         const std::vector<TopicPartition>& assigned = TwoPartitions(),
                         DeadLetters dead_letters = DeadLetters::kFakeWriter,
                         EngineStats* stats = nullptr) {
    Start(config, assigned, dead_letters, stats);
  }
  EngineHarness(const EngineHarness&) = delete;
  EngineHarness& operator=(const EngineHarness&) = delete;

  // Builds `engine_` from `config` on `clock_` (and `writer_` unless
  // kNone; `stats` may be null) and assigns it `assigned` (none: the test
  // assigns later); an engine started before is replaced. Returns the new
  // engine. A derived fixture's members die before this base: a fixture
  // whose member the engine may still use then (an EngineStats) resets
  // `engine_` in its destructor.
  Engine& Start(const Config& config,
                const std::vector<TopicPartition>& assigned = TwoPartitions(),
                DeadLetters dead_letters = DeadLetters::kFakeWriter,
                EngineStats* stats = nullptr) {
    engine_.reset();
    engine_ = std::make_unique<Engine>(
        config, &clock_, dead_letters == DeadLetters::kNone ? nullptr : &writer_, stats);
    if (!assigned.empty()) engine_->OnAssigned(assigned);
    return *engine_;
  }

  FakeClock clock_;
  FakeDeadLetterWriter writer_;
  std::unique_ptr<Engine> engine_;
};

}  // namespace ferry::testing

#endif  // FERRY_TESTS_MOCKS_ENGINE_FIXTURES_H_
