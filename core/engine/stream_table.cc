#include "core/engine/stream_table.h"

#include <algorithm>

namespace ferry {

int64_t StreamTable::Add(int processor, WorkerStream* stream) {
  const int64_t id = next_id_++;
  Entry& entry = streams_[id];
  entry.stream = stream;
  entry.processor = processor;
  return id;
}

StreamTable::Entry* StreamTable::Find(int64_t id) {
  auto it = streams_.find(id);
  return it == streams_.end() ? nullptr : &it->second;
}

bool StreamTable::AddCredit(Entry& entry, uint32_t credit) {
  entry.credit += credit;
  if (entry.credit <= kMaxCredit) return true;
  entry.credit = kMaxCredit;
  return false;
}

int64_t StreamTable::InFlightOf(int processor) const {
  int64_t in_flight = 0;
  for (const auto& [id, stream] : streams_) {
    if (stream.processor == processor) in_flight += stream.in_flight;
  }
  return in_flight;
}

void StreamTable::AddToSnapshot(EngineSnapshot* snapshot) const {
  const size_t processors = snapshot->processors.size();
  for (const auto& [id, stream] : streams_) {
    if (stream.ready) ++snapshot->connected_streams;
    if (stream.processor < 0 || static_cast<size_t>(stream.processor) >= processors) continue;
    ProcessorSnapshot& processor = snapshot->processors[static_cast<size_t>(stream.processor)];
    if (stream.ready) {
      ++processor.connected_streams;
      processor.credit += std::max<int64_t>(0, stream.credit);
    }
    processor.in_flight += stream.in_flight;
    snapshot->streams.push_back({id, stream.processor, stream.ready,
                                 std::max<int64_t>(0, stream.credit), stream.in_flight,
                                 stream.worker_name});
  }
}

}  // namespace ferry
