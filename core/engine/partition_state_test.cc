#include "core/engine/partition_state.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace ferry {
namespace {

using ::std::nullopt;
using ::std::optional;

// ---------------------------------------------------------------------------
// Focused unit tests.
// ---------------------------------------------------------------------------

TEST(PartitionStateTest, EmptyState) {
  PartitionState s;
  EXPECT_EQ(s.CommitOffset(), nullopt);
  EXPECT_EQ(s.Pending(), 0u);
  EXPECT_EQ(s.LowestUnfinished(), nullopt);
}

TEST(PartitionStateTest, BeginWithoutDoneCommitsNothing) {
  PartitionState s;
  s.Begin(0);
  s.Begin(1);
  EXPECT_EQ(s.CommitOffset(), nullopt);
  EXPECT_EQ(s.Pending(), 2u);
  EXPECT_EQ(s.LowestUnfinished(), 0);
}

TEST(PartitionStateTest, InOrderBeginDone) {
  PartitionState s;
  for (int64_t o = 10; o < 15; ++o) {
    s.Begin(o);
    EXPECT_EQ(s.Pending(), 1u);
    EXPECT_EQ(s.LowestUnfinished(), o);
    s.Done(o);
    EXPECT_EQ(s.CommitOffset(), o + 1);
    EXPECT_EQ(s.Pending(), 0u);
    EXPECT_EQ(s.LowestUnfinished(), nullopt);
  }
}

TEST(PartitionStateTest, InOrderDoneAfterSeveralBegins) {
  PartitionState s;
  s.Begin(0);
  s.Begin(1);
  s.Begin(2);
  s.Done(0);
  EXPECT_EQ(s.CommitOffset(), 1);
  EXPECT_EQ(s.LowestUnfinished(), 1);
  EXPECT_EQ(s.Pending(), 2u);
  s.Done(1);
  EXPECT_EQ(s.CommitOffset(), 2);
  s.Done(2);
  EXPECT_EQ(s.CommitOffset(), 3);
  EXPECT_EQ(s.Pending(), 0u);
  EXPECT_EQ(s.LowestUnfinished(), nullopt);
}

TEST(PartitionStateTest, OutOfOrderDoneBlocksUntilHeadFinishes) {
  PartitionState s;
  s.Begin(100);
  s.Begin(101);
  s.Begin(102);
  s.Begin(103);

  s.Done(102);
  s.Done(101);
  s.Done(103);
  // 100 is still being processed: nothing may be committed past it.
  EXPECT_EQ(s.CommitOffset(), nullopt);
  EXPECT_EQ(s.LowestUnfinished(), 100);
  // Finished offsets waiting behind the head are still pending.
  EXPECT_EQ(s.Pending(), 4u);

  s.Done(100);
  EXPECT_EQ(s.CommitOffset(), 104);
  EXPECT_EQ(s.Pending(), 0u);
  EXPECT_EQ(s.LowestUnfinished(), nullopt);
}

TEST(PartitionStateTest, OutOfOrderDoneReleasesOnlyTheContiguousPrefix) {
  PartitionState s;
  for (int64_t o = 0; o < 6; ++o) s.Begin(o);
  s.Done(0);
  s.Done(2);
  s.Done(4);
  s.Done(5);
  EXPECT_EQ(s.CommitOffset(), 1);
  EXPECT_EQ(s.LowestUnfinished(), 1);
  EXPECT_EQ(s.Pending(), 5u);

  s.Done(1);  // releases 1 and 2, stops at 3
  EXPECT_EQ(s.CommitOffset(), 3);
  EXPECT_EQ(s.LowestUnfinished(), 3);
  EXPECT_EQ(s.Pending(), 3u);

  s.Done(3);  // releases 3, 4, 5
  EXPECT_EQ(s.CommitOffset(), 6);
  EXPECT_EQ(s.Pending(), 0u);
}

TEST(PartitionStateTest, GapsInOffsetsDoNotBlock) {
  // Compaction / transaction markers: offsets 1-4, 6, 8 never arrive.
  PartitionState s;
  s.Begin(0);
  s.Begin(5);
  s.Begin(7);
  s.Begin(9);
  s.Done(5);
  s.Done(0);
  EXPECT_EQ(s.CommitOffset(), 6);
  EXPECT_EQ(s.LowestUnfinished(), 7);
  s.Done(9);
  EXPECT_EQ(s.CommitOffset(), 6);
  s.Done(7);
  EXPECT_EQ(s.CommitOffset(), 10);
  EXPECT_EQ(s.Pending(), 0u);
  EXPECT_EQ(s.LowestUnfinished(), nullopt);
}

TEST(PartitionStateTest, DoneWithoutBeginBelowHeadsIsDiscarded) {
  PartitionState s;
  s.Begin(50);
  s.Begin(51);
  // Anomaly (e.g. a replay): results for offsets that were never begun and lie
  // below every in-flight offset. They must neither commit nor block.
  s.Done(3);
  s.Done(49);
  EXPECT_EQ(s.CommitOffset(), nullopt);
  EXPECT_EQ(s.Pending(), 2u);
  EXPECT_EQ(s.LowestUnfinished(), 50);

  s.Done(50);
  EXPECT_EQ(s.CommitOffset(), 51);
  EXPECT_EQ(s.LowestUnfinished(), 51);
  s.Done(51);
  EXPECT_EQ(s.CommitOffset(), 52);
  EXPECT_EQ(s.Pending(), 0u);
}

// A Done that arrives before its Begin (a result for an offset this state
// has not begun, e.g. from an earlier assignment's delivery) is discarded:
// kept, it would mark that offset finished the moment it is begun and let
// the commit pass an event that was never processed.
TEST(PartitionStateTest, DoneBeforeItsBeginIsDiscarded) {
  PartitionState s;
  s.Begin(5);
  EXPECT_FALSE(s.Done(7));  // 7 is not begun yet
  EXPECT_FALSE(s.Done(6));
  EXPECT_TRUE(s.Done(5));
  EXPECT_EQ(s.CommitOffset(), 6);
  s.Begin(6);
  s.Begin(7);
  EXPECT_TRUE(s.Done(6));
  // 7 is begun and unfinished: the early Done must not have counted.
  EXPECT_EQ(s.CommitOffset(), 7);
  EXPECT_EQ(s.LowestUnfinished(), 7);
  EXPECT_EQ(s.Pending(), 1u);
  EXPECT_TRUE(s.Done(7));
  EXPECT_EQ(s.CommitOffset(), 8);
}

// With gaps in the offsets a Done's slot is not at (offset - head): it is
// searched for, and an offset inside a gap is refused.
TEST(PartitionStateTest, DoneAcrossGapsFindsItsOffsetAndRefusesTheGaps) {
  PartitionState s;
  for (int64_t o : {0, 5, 7, 8, 20}) s.Begin(o);
  EXPECT_FALSE(s.Done(3));
  EXPECT_FALSE(s.Done(6));
  EXPECT_FALSE(s.Done(21));
  EXPECT_TRUE(s.Done(8));
  EXPECT_TRUE(s.Done(20));
  EXPECT_TRUE(s.Done(5));
  EXPECT_EQ(s.CommitOffset(), nullopt);
  EXPECT_TRUE(s.Done(0));
  EXPECT_EQ(s.CommitOffset(), 6);
  EXPECT_EQ(s.LowestUnfinished(), 7);
  EXPECT_TRUE(s.Done(7));
  EXPECT_EQ(s.CommitOffset(), 21);
}

TEST(PartitionStateTest, DuplicateDoneBehindTheHeadIsRefused) {
  PartitionState s;
  s.Begin(0);
  s.Begin(1);
  EXPECT_TRUE(s.Done(1));
  EXPECT_FALSE(s.Done(1));
  EXPECT_EQ(s.Pending(), 2u);
  EXPECT_TRUE(s.Done(0));
  EXPECT_EQ(s.CommitOffset(), 2);
}

TEST(PartitionStateTest, TheBlockersConsumptionTimeFollowsTheHead) {
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  PartitionState s;
  EXPECT_EQ(s.LowestUnfinishedSince(), nullopt);
  s.Begin(10, t0);
  s.Begin(11, t0 + absl::Seconds(1));
  s.Begin(12, t0 + absl::Seconds(2));
  EXPECT_EQ(s.LowestUnfinishedSince(), t0);
  s.Done(11);
  EXPECT_EQ(s.LowestUnfinishedSince(), t0);
  s.Done(10);
  EXPECT_EQ(s.LowestUnfinishedSince(), t0 + absl::Seconds(2));
  s.Done(12);
  EXPECT_EQ(s.LowestUnfinishedSince(), nullopt);
}

TEST(PartitionStateTest, DuplicateDoneOfCommittedOffsetIsDiscarded) {
  PartitionState s;
  s.Begin(0);
  s.Begin(1);
  s.Done(0);
  EXPECT_EQ(s.CommitOffset(), 1);
  s.Done(0);  // a duplicate result for an already committed offset
  EXPECT_EQ(s.CommitOffset(), 1);
  EXPECT_EQ(s.LowestUnfinished(), 1);
  EXPECT_EQ(s.Pending(), 1u);
  s.Done(1);
  EXPECT_EQ(s.CommitOffset(), 2);
  // A later offset is not affected by the stale duplicate.
  s.Begin(2);
  EXPECT_EQ(s.CommitOffset(), 2);
  EXPECT_EQ(s.LowestUnfinished(), 2);
  s.Done(2);
  EXPECT_EQ(s.CommitOffset(), 3);
}

TEST(PartitionStateTest, ClearForgetsEverything) {
  PartitionState s;
  s.Begin(0);
  s.Begin(1);
  s.Begin(2);
  s.Done(0);
  s.Done(2);
  ASSERT_EQ(s.CommitOffset(), 1);

  s.Clear();
  EXPECT_EQ(s.CommitOffset(), nullopt);
  EXPECT_EQ(s.Pending(), 0u);
  EXPECT_EQ(s.LowestUnfinished(), nullopt);

  // Reassigned later, restarting from the committed position (1): the done
  // mark for 2 from before the Clear must not survive.
  s.Begin(1);
  s.Begin(2);
  s.Done(1);
  EXPECT_EQ(s.CommitOffset(), 2);
  EXPECT_EQ(s.LowestUnfinished(), 2);
  EXPECT_EQ(s.Pending(), 1u);
  s.Done(2);
  EXPECT_EQ(s.CommitOffset(), 3);
}

TEST(PartitionStateTest, LowestUnfinishedIsTheCommitBlocker) {
  PartitionState s;
  s.Begin(4);
  s.Begin(8);
  s.Begin(15);
  EXPECT_EQ(s.LowestUnfinished(), 4);
  s.Done(8);
  EXPECT_EQ(s.LowestUnfinished(), 4);  // 8 finished but 4 still blocks
  s.Done(4);
  EXPECT_EQ(s.LowestUnfinished(), 15);  // 4 and 8 released
  EXPECT_EQ(s.CommitOffset(), 9);
  s.Done(15);
  EXPECT_EQ(s.LowestUnfinished(), nullopt);
}

TEST(PartitionStateTest, PendingCountsFinishedOffsetsBehindTheHead) {
  PartitionState s;
  EXPECT_EQ(s.Pending(), 0u);
  s.Begin(0);
  s.Begin(1);
  s.Begin(2);
  EXPECT_EQ(s.Pending(), 3u);
  s.Done(2);
  EXPECT_EQ(s.Pending(), 3u);
  s.Done(1);
  EXPECT_EQ(s.Pending(), 3u);
  s.Done(0);
  EXPECT_EQ(s.Pending(), 0u);
}

TEST(PartitionStateTest, LargeOffsets) {
  PartitionState s;
  const int64_t base = int64_t{1} << 50;
  s.Begin(base);
  s.Begin(base + 1);
  s.Done(base + 1);
  EXPECT_EQ(s.CommitOffset(), nullopt);
  s.Done(base);
  EXPECT_EQ(s.CommitOffset(), base + 2);
}

// ---------------------------------------------------------------------------
// Property test: random interleavings against a simple model.
// ---------------------------------------------------------------------------

// The reference model: the begun offsets since the last Clear, each with a
// done flag, in offset order. The committed prefix is the longest run of done
// offsets starting at the smallest begun offset.
class Model {
 public:
  void Begin(int64_t offset) { begun_[offset] = false; }
  void Done(int64_t offset) { begun_.at(offset) = true; }
  void Clear() { begun_.clear(); }

  optional<int64_t> CommitOffset() const {
    optional<int64_t> last_done;
    for (const auto& [offset, done] : begun_) {
      if (!done) break;
      last_done = offset;
    }
    if (!last_done) return nullopt;
    return *last_done + 1;
  }

  size_t Pending() const {
    size_t committed = 0;
    for (const auto& entry : begun_) {
      if (!entry.second) break;
      ++committed;
    }
    return begun_.size() - committed;
  }

  optional<int64_t> LowestUnfinished() const {
    for (const auto& [offset, done] : begun_) {
      if (!done) return offset;
    }
    return nullopt;
  }

  // Begun offsets that are not done yet (candidates for Done).
  std::vector<int64_t> Unfinished() const {
    std::vector<int64_t> out;
    for (const auto& [offset, done] : begun_) {
      if (!done) out.push_back(offset);
    }
    return out;
  }

 private:
  std::map<int64_t, bool> begun_;
};

// Deliberately wrong implementations; the property check must catch them.
// Commits the largest done offset + 1 (ignores unfinished lower offsets).
class NaiveMaxDone {
 public:
  void Begin(int64_t offset) { begun_[offset] = false; }
  void Done(int64_t offset) {
    begun_[offset] = true;
    if (!max_done_ || offset > *max_done_) max_done_ = offset;
  }
  void Clear() {
    begun_.clear();
    max_done_.reset();
  }
  optional<int64_t> CommitOffset() const {
    if (!max_done_) return nullopt;
    return *max_done_ + 1;
  }
  size_t Pending() const {
    size_t n = 0;
    for (const auto& entry : begun_) n += entry.second ? 0 : 1;
    return n;
  }
  optional<int64_t> LowestUnfinished() const {
    for (const auto& [offset, done] : begun_) {
      if (!done) return offset;
    }
    return nullopt;
  }

 private:
  std::map<int64_t, bool> begun_;
  optional<int64_t> max_done_;
};

// Correct commit offsets, but keeps them across Clear (a stale position).
class KeepsCommitAcrossClear : public PartitionState {
 public:
  void Clear() {
    last_ = PartitionState::CommitOffset();
    PartitionState::Clear();
  }
  optional<int64_t> CommitOffset() const {
    auto c = PartitionState::CommitOffset();
    return c ? c : last_;
  }

 private:
  optional<int64_t> last_;
};

// Counts only unfinished offsets as pending (finished-behind-head excluded).
class PendingIgnoresFinished {
 public:
  void Begin(int64_t offset) {
    real_.Begin(offset);
    ++unfinished_;
  }
  void Done(int64_t offset) {
    real_.Done(offset);
    --unfinished_;
  }
  void Clear() {
    real_.Clear();
    unfinished_ = 0;
  }
  optional<int64_t> CommitOffset() const { return real_.CommitOffset(); }
  size_t Pending() const { return unfinished_; }
  optional<int64_t> LowestUnfinished() const {
    return real_.LowestUnfinished();
  }

 private:
  PartitionState real_;
  size_t unfinished_ = 0;
};

std::string Show(const optional<int64_t>& v) {
  return v ? std::to_string(*v) : std::string("nullopt");
}

struct CaseParams {
  int steps;            // operations in this case
  int max_gap;          // offsets advance by 1 + [0, max_gap]
  double p_begin;       // probability of a Begin (when a Done is possible)
  double p_clear;       // probability of a Clear
};

// Runs one random case against `Impl`. Returns "" when the implementation
// agreed with the model after every step, else a description of the first
// disagreement (with the operation log leading to it).
template <typename Impl>
std::string RunCase(uint64_t seed) {
  std::mt19937_64 rng(seed);
  auto uniform = [&rng](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  auto chance = [&rng](double p) {
    return std::bernoulli_distribution(p)(rng);
  };

  CaseParams params;
  params.steps = static_cast<int>(uniform(1, 200));
  params.max_gap = chance(0.3) ? 0 : static_cast<int>(uniform(1, 5));
  params.p_begin = 0.3 + 0.5 * std::uniform_real_distribution<double>()(rng);
  params.p_clear = chance(0.5) ? 0.0 : 0.02;

  Impl impl;
  Model model;
  int64_t next = uniform(0, 1000);  // next offset to Begin
  std::ostringstream log;

  for (int step = 0; step < params.steps; ++step) {
    const std::vector<int64_t> unfinished = model.Unfinished();
    if (chance(params.p_clear)) {
      log << "Clear ";
      impl.Clear();
      model.Clear();
      // After a revoke/reassign Kafka restarts at the committed position or
      // anywhere else; jump back a little to reuse offsets seen before.
      next = std::max<int64_t>(0, next - uniform(0, 20));
    } else if (unfinished.empty() || chance(params.p_begin)) {
      next += uniform(0, params.max_gap);
      log << "B" << next << " ";
      impl.Begin(next);
      model.Begin(next);
      ++next;
    } else {
      const int64_t offset =
          unfinished[uniform(0, static_cast<int64_t>(unfinished.size()) - 1)];
      log << "D" << offset << " ";
      impl.Done(offset);
      model.Done(offset);
    }

    std::ostringstream diff;
    if (impl.CommitOffset() != model.CommitOffset()) {
      diff << "CommitOffset: got " << Show(impl.CommitOffset()) << ", want "
           << Show(model.CommitOffset()) << "\n";
    }
    if (impl.Pending() != model.Pending()) {
      diff << "Pending: got " << impl.Pending() << ", want "
           << model.Pending() << "\n";
    }
    if (impl.LowestUnfinished() != model.LowestUnfinished()) {
      diff << "LowestUnfinished: got " << Show(impl.LowestUnfinished())
           << ", want " << Show(model.LowestUnfinished()) << "\n";
    }
    if (!diff.str().empty()) {
      return "after step " + std::to_string(step) + ":\n" + diff.str() +
             "ops: " + log.str();
    }
  }
  return "";
}

constexpr uint64_t kBaseSeed = 0x5eed'f00d'cafe'0001ULL;
constexpr int kCases = 5000;

uint64_t CaseSeed(int i) { return kBaseSeed + static_cast<uint64_t>(i); }

TEST(PartitionStatePropertyTest, MatchesModelOnRandomInterleavings) {
  int failures = 0;
  for (int i = 0; i < kCases && failures < 5; ++i) {
    const uint64_t seed = CaseSeed(i);
    SCOPED_TRACE("case " + std::to_string(i) + " seed " + std::to_string(seed) +
                 " (reproduce: RunCase<PartitionState>(" +
                 std::to_string(seed) + "ULL))");
    const std::string failure = RunCase<PartitionState>(seed);
    EXPECT_EQ(failure, "");
    if (!failure.empty()) ++failures;
  }
}

// The property check itself must be strong enough to reject wrong
// implementations; otherwise a green run above means nothing.
template <typename Impl>
int CountDetectedCases() {
  int detected = 0;
  for (int i = 0; i < kCases; ++i) {
    if (!RunCase<Impl>(CaseSeed(i)).empty()) ++detected;
  }
  return detected;
}

TEST(PartitionStatePropertyTest, RejectsNaiveMaxDoneCommit) {
  const int detected = CountDetectedCases<NaiveMaxDone>();
  EXPECT_GT(detected, kCases / 4) << "detected in " << detected << " cases";
}

TEST(PartitionStatePropertyTest, RejectsCommitKeptAcrossClear) {
  EXPECT_GT(CountDetectedCases<KeepsCommitAcrossClear>(), 0);
}

TEST(PartitionStatePropertyTest, RejectsPendingWithoutFinishedBehindHead) {
  EXPECT_GT(CountDetectedCases<PendingIgnoresFinished>(), kCases / 4);
}

}  // namespace
}  // namespace ferry
