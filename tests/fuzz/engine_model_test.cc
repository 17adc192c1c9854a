// Property test of the whole engine: random interleavings of submits,
// worker messages (Ready, Credit, OK/RETRY/FAIL results, unknown statuses,
// bytes that are not a ProcessResponse),
// stream losses, revokes and assignments, partition resets, operator skips,
// commits and timer ticks, checked step by step against EngineModel's model
// (nothing committed that is not finished, per-key and per-partition order,
// credit, snapshot consistency) and drained at the end (nothing lost).
// Deterministic: every run uses the same seeds; a failure names its seed
// and step.
#include <cstdint>
#include <random>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/fuzz/engine_model.h"

namespace ferry::fuzz {
namespace {

constexpr int kSteps = 3000;

// One random step; weights favour the common path (submit, answer, credit).
absl::Status RandomStep(EngineModel& model, std::mt19937_64& random) {
  auto pick = [&random](int n) { return static_cast<int>(random() % static_cast<uint64_t>(n)); };
  const int choice = pick(100);
  if (choice < 30) return model.Submit(pick(64), pick(8));
  if (choice < 55) {
    static constexpr v1::Result::Status kStatuses[] = {
        v1::Result::OK,   v1::Result::OK, v1::Result::OK, v1::Result::RETRY,
        v1::Result::FAIL, v1::Result::NOT_ATTEMPTED};
    const v1::Result::Status status =
        pick(200) == 0 ? static_cast<v1::Result::Status>(7) : kStatuses[pick(6)];
    return model.Answer(pick(8), pick(64), status, pick(4) == 0 ? 0 : 1,
                        pick(4) == 0 ? pick(3000) : 0);
  }
  if (choice < 62) return model.Credit(pick(8), pick(4));
  if (choice < 67) {
    // Half the workers take runs (Ready.max_run 2..5).
    return model.Ready(pick(8), pick(6) + (pick(10) == 0 ? 0 : 1),
                       pick(2) == 0 ? 0 : pick(4) + 2);
  }
  if (choice < 77) return model.Tick(absl::Milliseconds(pick(4) == 0 ? 11000 : pick(1500)));
  if (choice < 84) return model.Commit();
  if (choice < 86) return model.CloseStream(pick(8));
  if (choice < 87) return model.WorkerBytes(pick(8), "\xff\xff\xff");  // not a ProcessResponse
  if (choice < 90) {
    model.OpenStream();  // a scale-up: one more stream
    return absl::OkStatus();
  }
  if (choice < 92) return model.Revoke(pick(64));
  if (choice < 95) return model.Assign(pick(64));
  if (choice < 97) return model.Reset(pick(64), pick(2) == 0);
  return model.Skip(pick(64), pick(64));
}

void RunSeed(const ModelOptions& options, uint64_t seed) {
  std::mt19937_64 random(seed);
  EngineModel model(options);
  model.OpenStream();
  model.OpenStream();
  for (int step = 0; step < kSteps; ++step) {
    const absl::Status status = RandomStep(model, random);
    ASSERT_TRUE(status.ok()) << "seed " << seed << ", step " << step << ": " << status;
  }
  const absl::Status drained = model.Drain();
  ASSERT_TRUE(drained.ok()) << "seed " << seed << ", drain: " << drained;
  const EngineCounters counters = model.engine().Snapshot().counters;
  // The run must have exercised the paths it claims to.
  EXPECT_GT(counters.acked, 50) << "seed " << seed;
  EXPECT_GT(counters.redelivered + counters.dropped_on_revoke, 0) << "seed " << seed;
}

TEST(EnginePropertyTest, SkipPolicy) {
  for (uint64_t seed = 1; seed <= 8; ++seed) RunSeed(ModelOptions{}, seed);
}

TEST(EnginePropertyTest, BlockPolicy) {
  ModelOptions options;
  options.policy = FailurePolicy::kBlock;
  for (uint64_t seed = 101; seed <= 108; ++seed) RunSeed(options, seed);
}

TEST(EnginePropertyTest, RetryOnTimeoutOneAttemptSmallCap) {
  ModelOptions options;
  options.retry_on_timeout = true;
  options.max_attempts = 1;
  options.max_in_flight = 2;
  options.max_buffered = 20;
  for (uint64_t seed = 201; seed <= 208; ++seed) RunSeed(options, seed);
}

TEST(EnginePropertyTest, ManyAttemptsOnePartitionEach) {
  ModelOptions options;
  options.max_attempts = 6;
  options.partitions = 1;
  for (uint64_t seed = 301; seed <= 308; ++seed) RunSeed(options, seed);
}

}  // namespace
}  // namespace ferry::fuzz
