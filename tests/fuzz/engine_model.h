// EngineModel: drives a real Engine (fake clock, fake worker streams) the way
// the Kafka consumer, the worker pool and the committer do, and checks every
// step against a small model of what must always hold:
//   * nothing is committed (PendingCommits, OnRevoked) past an offset that is
//     certainly unfinished: never dispatched, in flight, redelivering,
//     waiting for a retry or held by a `block` failure;
//   * an offset is never dispatched again once certainly finished, never
//     twice at once, never to a closed or reset stream, never beyond the
//     credit its worker granted;
//   * per-key order (topic "key") and per-partition order (topic
//     "partition"): no event is dispatched while an earlier one of its key
//     (partition) is certainly unfinished, unless that one is in flight in
//     the same run (workers that set Ready.max_run; core/engine/runs.h): a
//     run member given back NOT_ATTEMPTED stays unfinished and keeps its
//     attempt, while NOT_ATTEMPTED of any other event is a RETRY;
//   * the engine's snapshot adds up (in flight, buffered, per stream), and
//     what a worker calls itself is bounded and sanitised;
//   * nothing is lost: Drain() answers everything OK and then every
//     submitted offset must be committable and nothing buffered.
// "Certainly" because the model does not redo the engine's arithmetic
// (deadlines, backoff, stale results): when a step makes an outcome
// ambiguous (a deadline may have passed) the model stops asserting about that
// delivery until it is dispatched again.
//
// Used by the engine property test (random steps from a seed) and the
// worker-message fuzzer (steps and raw ProcessResponse bytes from libFuzzer).
// Every step returns a non-OK status naming the violated property.
//
// Threading: not thread-safe; one thread drives it (the engine is called
// synchronously, as the fake streams require).
#ifndef FERRY_TESTS_FUZZ_ENGINE_MODEL_H_
#define FERRY_TESTS_FUZZ_ENGINE_MODEL_H_

#include <cstdint>
#include <cstdlib>
#include <deque>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "core/config/config.h"
#include "core/engine/engine.h"
#include "ferry/v1/processor.pb.h"
#include "tests/mocks/fake_clock.h"
#include "tests/mocks/fake_worker_stream.h"

namespace ferry::fuzz {

struct ModelOptions {
  FailurePolicy policy = FailurePolicy::kSkip;  // kSkip or kBlock
  int max_attempts = 3;
  int max_in_flight = 8;     // ferry's cap per stream
  int partitions = 2;        // per topic
  int max_buffered = 200;    // budget: Submit stops at it, like the consumer
  bool retry_on_timeout = false;
};

class EngineModel {
 public:
  // Topics "key", "partition" and "unordered", with those orderings.
  static constexpr int kTopics = 3;

  explicit EngineModel(ModelOptions options);
  ~EngineModel();
  EngineModel(const EngineModel&) = delete;
  EngineModel& operator=(const EngineModel&) = delete;

  int partition_count() const { return static_cast<int>(partitions_.size()); }
  int stream_count() const { return static_cast<int>(streams_.size()); }

  // ---- Consumer and operator (indices wrap around) ----
  // The partition's next offset, with key "k<key>"; nothing when the
  // partition is not assigned or the budget is full (the consumer pauses).
  absl::Status Submit(int partition, int key);
  absl::Status Revoke(int partition);
  absl::Status Assign(int partition);
  // `rewind`: the next offset restarts from the last committed one.
  absl::Status Reset(int partition, bool rewind);
  // SkipOffset on the pick-th offset not yet committable.
  absl::Status Skip(int partition, int pick);
  // PendingCommits, checked, then MarkCommitted.
  absl::Status Commit();

  // ---- Worker side ----
  // Streams are named by index among the open ones (wrapping around); a
  // closed or reset stream is replaced by a new one, as the pool does.
  int OpenStream();  // a new stream (not ready)
  // `max_run` > 1: the worker takes runs.
  absl::Status Ready(int stream, uint32_t credit, uint32_t max_run = 0);
  absl::Status Credit(int stream, uint32_t credit);
  // A Results message answering the pick-th event in flight on the stream
  // (none: credit only).
  absl::Status Answer(int stream, int pick, v1::Result::Status status, uint32_t credit,
                      uint32_t retry_after_ms);
  // One message, applied as server/workers/worker_pool.cc applies it.
  absl::Status Respond(int stream, const v1::ProcessResponse& response);
  // Bytes from the worker: parsed as a ProcessResponse; bytes that do not
  // parse are a protocol error (Engine::OnProtocolError) and the stream is
  // reset, as the pool does.
  absl::Status WorkerBytes(int stream, const std::string& bytes);
  absl::Status CloseStream(int stream);

  // ---- Timers ----
  absl::Status Tick(absl::Duration advance);

  // Answers everything OK (and skips what `block` holds) until nothing is
  // buffered, then requires every submitted offset to be committable.
  absl::Status Drain();

  const Engine& engine() const { return *engine_; }

 private:
  enum class DeliveryState {
    kOutstanding,  // certainly at the worker, unanswered
    kRequeued,     // its stream was lost: certainly waiting to be redelivered
    kAnswered,     // a result the engine certainly applied
    kUnknown,      // maybe timed out, revoked, skipped: no claims
  };
  struct Delivery {
    int partition = 0;
    uint64_t epoch = 0;  // the model's epoch of that partition
    int64_t offset = 0;
    int stream = 0;
    int attempt = 0;
    int64_t deadline_ms = 0;
    DeliveryState state = DeliveryState::kOutstanding;
    v1::Result::Status answer = v1::Result::STATUS_UNSPECIFIED;
    uint64_t run_id = 0;   // Event.run_id (0: sent alone)
    int run_position = 0;  // from 1 in its run
  };
  struct OffsetModel {
    int key = 0;
    uint64_t latest = 0;  // delivery id of its last dispatch (0: never)
    bool skipped = false;
    // Lost streams it was in flight on: past kMaxRedeliveries the engine may
    // fail it instead of redelivering (core/engine/redelivery.h).
    int losses = 0;
  };
  struct PartitionModel {
    TopicPartition tp;
    Ordering ordering = Ordering::kKey;
    bool assigned = true;
    uint64_t epoch = 0;
    int64_t next_offset = 0;
    int64_t max_submitted = -1;      // in this epoch
    int64_t committed = -1;          // last commit position in this epoch
    int64_t last_committed_any = 0;  // across epochs, where a new owner resumes
    std::map<int64_t, OffsetModel> offsets;  // this epoch, not yet committed
  };
  struct StreamModel {
    int index = 0;  // in streams_
    std::unique_ptr<testing::FakeWorkerStream> fake;
    int64_t engine_id = 0;
    bool open = true;
    bool ready = false;
    bool reset = false;  // the engine asked the pool to reset it
    int64_t granted = 0;
    int64_t received = 0;
    size_t batches_seen = 0;
  };
  enum class Fate { kUnfinished, kFinished, kUnknown };

  Fate FateOf(const OffsetModel& offset) const;
  // A run member after the first answered NOT_ATTEMPTED: back in its lane,
  // no attempt counted.
  static bool GivenBack(const Delivery& delivery);
  // The answer as the engine applies it: NOT_ATTEMPTED of an event that is
  // not given back is a RETRY.
  static v1::Result::Status Effective(const Delivery& delivery);
  // A terminal failure that `block` holds.
  bool Held(const Delivery& delivery) const;
  static const char* FateName(Fate fate);
  std::string Describe(const OffsetModel& offset) const;
  void SetState(uint64_t id, Delivery& delivery, DeliveryState state);
  absl::Status SkipAt(PartitionModel& partition, int64_t offset);
  PartitionModel* Find(const std::string& topic, int32_t partition);
  StreamModel* StreamAt(int stream);
  absl::Status RespondTo(StreamModel& stream, const v1::ProcessResponse& response);
  // After every engine call: collect dispatches, apply resets, check.
  absl::Status AfterStep();
  absl::Status CollectDispatches(int index);
  absl::Status CheckDispatch(const v1::Event& event, int stream_index);
  absl::Status CheckOrder(const PartitionModel& partition, int64_t offset, int key,
                          uint64_t run_id) const;
  absl::Status CheckCommit(const PartitionModel& partition, int64_t position,
                           const char* where) const;
  absl::Status CheckSnapshot() const;
  void ApplyResults(int stream, const v1::Results& results, bool reset);
  void StreamLost(int stream);
  void DropPartitionDeliveries(int partition);
  void NewEpoch(PartitionModel& partition);
  absl::Status DrainRound(int round);
  // An index from any int (fuzz input): value mod size, never negative.
  static int Wrap(int value, int size) { return size == 0 ? 0 : std::abs(value % size); }

  ModelOptions options_;
  testing::FakeClock clock_;
  std::unique_ptr<Engine> engine_;
  std::vector<PartitionModel> partitions_;
  std::deque<StreamModel> streams_;  // deque: references stay valid as it grows
  std::map<uint64_t, Delivery> deliveries_;
  std::set<uint64_t> outstanding_;  // deliveries in kOutstanding
  std::map<uint64_t, int> run_members_;  // run id -> members seen so far
  std::vector<WorkerStream*> reset_requests_;
  uint64_t next_epoch_ = 1;
};

}  // namespace ferry::fuzz

#endif  // FERRY_TESTS_FUZZ_ENGINE_MODEL_H_
