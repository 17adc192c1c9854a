// StreamTable: the worker streams the engine knows, with each one's state as
// the engine sees it: Ready or not, the credit its worker granted and not yet
// used, what it holds in flight, whether it is being reset after a protocol
// error, and its part in quarantine (core/engine/redelivery.h).
//
// Threading: not thread-safe; guarded by the Engine's mutex.
#ifndef FERRY_CORE_ENGINE_STREAM_TABLE_H_
#define FERRY_CORE_ENGINE_STREAM_TABLE_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/engine/types.h"
#include "core/engine/worker_stream.h"

namespace ferry {

class StreamTable {
 public:
  struct Entry {
    WorkerStream* stream = nullptr;
    int processor = 0;
    bool ready = false;
    int64_t credit = 0;  // granted minus sent
    int64_t in_flight = 0;
    // Ready.max_run: the most events of a lane it takes in one run
    // (core/engine/runs.h); 0 or 1, no runs.
    uint32_t max_run = 0;
    std::string worker_name;
    // A protocol error asked for its reset: nothing more is sent to it and
    // what it sends is ignored until it is closed.
    bool resetting = false;
    // Quarantine: the delivery id of the quarantined event it holds (nothing
    // else is sent to it meanwhile), and whether it is being drained to take
    // one.
    uint64_t quarantined_id = 0;
    bool reserved = false;
    // Why it is being reset (for the redelivery-limit error).
    std::string reset_reason;
  };

  // Credit beyond this is clamped (ferry's own cap still bounds what is
  // outstanding).
  static constexpr int64_t kMaxCredit = int64_t{1} << 31;

  explicit StreamTable(size_t processors) : last_used_(processors, 0) {}

  int64_t Add(int processor, WorkerStream* stream);
  void Erase(int64_t id) { streams_.erase(id); }
  Entry* Find(int64_t id);
  // Adds the worker's credit; false when it had to be clamped (a protocol
  // error to count).
  static bool AddCredit(Entry& entry, uint32_t credit);
  // One of its events left it without a send (result, timeout, drop).
  void EventLeft(int64_t id) {
    Entry* entry = Find(id);
    if (entry != nullptr) --entry->in_flight;
  }

  // The ids of `processor`'s streams for which `eligible` holds, starting
  // after the one used last so load spreads round-robin.
  template <typename Eligible>
  void Candidates(int processor, const Eligible& eligible, std::vector<int64_t>* out) const;
  void NoteUsed(int processor, int64_t id) { last_used_[static_cast<size_t>(processor)] = id; }

  // Events `processor`'s streams hold (a walk over the streams: for the
  // adaptive concurrency limit only).
  int64_t InFlightOf(int processor) const;

  std::map<int64_t, Entry>& entries() { return streams_; }
  // Streams and processors (sized like Config::processors) for a snapshot.
  void AddToSnapshot(EngineSnapshot* snapshot) const;

 private:
  std::map<int64_t, Entry> streams_;
  int64_t next_id_ = 1;
  // Round-robin position per processor over its streams.
  std::vector<int64_t> last_used_;
};

template <typename Eligible>
void StreamTable::Candidates(int processor, const Eligible& eligible,
                             std::vector<int64_t>* out) const {
  out->clear();
  for (const auto& [id, stream] : streams_) {
    if (stream.processor == processor && eligible(stream)) out->push_back(id);
  }
  const int64_t last = last_used_[static_cast<size_t>(processor)];
  std::rotate(out->begin(), std::upper_bound(out->begin(), out->end(), last), out->end());
}

}  // namespace ferry

#endif  // FERRY_CORE_ENGINE_STREAM_TABLE_H_
