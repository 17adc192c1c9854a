// Runs: the rules that decide and record runs (see "Runs" at the top of
// proto/ferry/v1/processor.proto). A run is up to Ready.max_run consecutive
// events of one ordering lane sent in one Events message with one non-zero
// run_id; the worker handles them in order and answers NOT_ATTEMPTED for
// every member after one that did not end OK. These are the pure pieces the
// dispatcher and the result path share:
//   * RunLength: how many events of a lane one dispatch may send as a run.
//   * MemberTimeout: the k-th member (from 1) gets k processor timeouts,
//     counted from when the run was sent.
//   * TreatAsNotAttempted: NOT_ATTEMPTED means "give it back without an
//     attempt" only for a run member after the first; otherwise it is RETRY.
//   * LinesUpBefore: where a member given back goes in its lane: after the
//     earlier members of its own run already there, before everything else,
//     so the lane's order holds whatever order the members come back in.
//   * RunIds: the run ids (non-zero, never reused in a process).
//
// Threading: pure functions; RunIds is a plain counter guarded by its owner
// (the Engine's mutex, through the Dispatcher).
#ifndef FERRY_CORE_ENGINE_RUNS_H_
#define FERRY_CORE_ENGINE_RUNS_H_

#include <algorithm>
#include <cstdint>

#include "absl/time/time.h"
#include "core/engine/queued_event.h"

namespace ferry {

// How many events one dispatch sends from a lane: at most `max_run` (0 or 1:
// the worker takes no runs), the stream's credit, the room under ferry's cap
// for the stream and the batch size, and at least 1.
inline int64_t RunLength(uint32_t max_run, int64_t credit, int64_t cap_room, int64_t max_batch) {
  const int64_t longest = std::min({static_cast<int64_t>(max_run), credit, cap_room, max_batch});
  return std::max<int64_t>(1, longest);
}

// The deadline span of a member at `position` (from 1; 0 = not in a run).
inline absl::Duration MemberTimeout(absl::Duration timeout, int position) {
  return timeout * std::max(1, position);
}

// Whether a NOT_ATTEMPTED result for `queued` gives it back unhandled (true)
// or counts as RETRY (false: it was not in a run, or it was the run's first
// member, which nothing before it could have stopped).
inline bool TreatAsNotAttempted(const QueuedEvent& queued) {
  return queued.run_id != 0 && queued.run_position > 1;
}

// Whether `waiting` (an event at the head of a lane) stays ahead of an event
// going back to the front of that lane, the member at `position` of run
// `run_id` (0: not a run member): true for an earlier member of that run.
inline bool LinesUpBefore(const QueuedEvent& waiting, uint64_t run_id, int position) {
  return run_id != 0 && waiting.run_id == run_id && waiting.run_position < position;
}

class RunIds {
 public:
  uint64_t Next() { return next_++; }

 private:
  uint64_t next_ = 1;
};

}  // namespace ferry

#endif  // FERRY_CORE_ENGINE_RUNS_H_
