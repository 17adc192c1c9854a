#include "core/engine/dispatcher.h"

#include <algorithm>
#include <cstddef>
#include <deque>
#include <limits>
#include <optional>
#include <utility>

#include "core/engine/engine_stats.h"
#include "core/engine/events_wire.h"

namespace ferry {
namespace {

bool HoldsQuarantined(const InFlightTable& in_flight, const StreamTable::Entry& stream) {
  // Delivery ids are never reused, so a stale id simply is not found.
  return stream.quarantined_id != 0 && in_flight.contains(stream.quarantined_id);
}

}  // namespace

// The Events message being filled per stream (one entry per stream that got
// events in this dispatch; a handful at most), serialized as it grows and
// queued in the outbox when full or done.
class Dispatcher::Batches {
 public:
  explicit Batches(Outbox& outbox) : outbox_(outbox) {}
  ~Batches() {
    for (Batch& batch : batches_) Flush(batch);
  }

  struct Batch {
    int64_t stream_id = 0;
    WorkerStream* stream = nullptr;
    EventsWire events;
  };
  Batch& For(int64_t stream_id, WorkerStream* stream) {
    for (Batch& batch : batches_) {
      if (batch.stream_id == stream_id) return batch;
    }
    batches_.emplace_back();
    batches_.back().stream_id = stream_id;
    batches_.back().stream = stream;
    return batches_.back();
  }
  void Flush(Batch& batch) {
    if (batch.events.count == 0) return;
    outbox_.PushEvents(batch.stream_id, batch.stream, std::move(batch.events));
    batch.events = EventsWire();
  }

 private:
  Outbox& outbox_;
  std::vector<Batch> batches_;
};

void Dispatcher::Run(const Parts& parts, absl::Time now) {
  for (size_t processor = 0; processor < config_.processors.size(); ++processor) {
    // Events whose streams keep being lost go first, each to a stream of its
    // own (core/engine/redelivery.h).
    DispatchQuarantined(parts, static_cast<int>(processor), now);
    DispatchProcessor(parts, static_cast<int>(processor), now);
  }
}

bool Dispatcher::HasRoom(const Parts& parts, const StreamTable::Entry& stream,
                         int64_t cap) const {
  return stream.ready && stream.credit > 0 && stream.in_flight < cap && !stream.reserved &&
         !HoldsQuarantined(parts.in_flight, stream);
}

void Dispatcher::DispatchProcessor(const Parts& parts, int processor, absl::Time now) {
  auto has_work = [&parts, processor](int flow) { return parts.queues.HasWork(processor, flow); };
  bool any_work = false;
  for (int flow = 0; flow < flow_count_ && !any_work; ++flow) any_work = has_work(flow);
  if (!any_work) return;
  auto take = [&parts, processor](int flow) { return parts.queues.Take(processor, flow); };

  const ProcessorConfig& processor_config = config_.processors[static_cast<size_t>(processor)];
  const int64_t cap = processor_config.max_in_flight;
  auto has_room = [this, &parts, cap](const StreamTable::Entry& stream) {
    return HasRoom(parts, stream, cap);
  };
  std::vector<int64_t>& candidates = candidates_;
  parts.streams.Candidates(processor, has_room, &candidates);
  if (candidates.empty()) return;

  Batches batches(parts.outbox);
  size_t next = 0;
  while (!candidates.empty()) {
    // Next event: by priority class and flow (core/engine/scheduler.h).
    std::optional<QueuedEvent> taken = parts.scheduler.Next(processor, has_work, take);
    if (!taken.has_value()) break;

    if (next >= candidates.size()) next = 0;
    const int64_t stream_id = candidates[next];
    StreamTable::Entry& stream = *parts.streams.Find(stream_id);
    // An event redelivered after a lost stream travels alone
    // (core/engine/redelivery.h).
    const bool alone = taken->strikes > 0;
    const v1::Event& event = StartDelivery(parts, std::move(*taken), stream_id, stream, now);
    const size_t event_size = event.ByteSizeLong();
    Batches::Batch* batch = &batches.For(stream_id, stream.stream);
    if (alone || static_cast<int64_t>(batch->events.bytes.size() + event_size) + kEventFraming >
                     processor_config.max_batch_bytes) {
      batches.Flush(*batch);
    }
    AppendEventWire(event, event_size, &batch->events);
    if (alone) {
      batch->events.alone = true;
      batches.Flush(*batch);
    }
    parts.streams.NoteUsed(processor, stream_id);
    if (batch->events.count >= processor_config.max_batch) batches.Flush(*batch);
    if (!has_room(stream)) {
      batches.Flush(*batch);
      candidates.erase(candidates.begin() + static_cast<std::ptrdiff_t>(next));
    } else {
      ++next;
    }
  }
}

void Dispatcher::DispatchQuarantined(const Parts& parts, int processor, absl::Time now) {
  std::deque<QueuedEvent>& queue = parts.queues.quarantine(processor);
  while (!queue.empty()) {
    int64_t target = 0;
    int64_t to_reserve = 0;
    int64_t fewest = std::numeric_limits<int64_t>::max();
    bool reserved = false;
    for (auto& [id, stream] : parts.streams.entries()) {
      if (stream.processor != processor || !stream.ready ||
          HoldsQuarantined(parts.in_flight, stream)) {
        continue;
      }
      reserved = reserved || stream.reserved;
      if (stream.in_flight == 0 && stream.credit > 0) {
        target = id;
        break;
      }
      if (stream.in_flight < fewest) {
        fewest = stream.in_flight;
        to_reserve = id;
      }
    }
    if (target == 0) {
      // No idle stream: drain one (nothing new goes to it) so the event is
      // not starved by fresh work; its results bring the next dispatch here.
      if (!reserved && to_reserve != 0) parts.streams.Find(to_reserve)->reserved = true;
      return;
    }
    StreamTable::Entry& stream = *parts.streams.Find(target);
    stream.reserved = false;
    QueuedEvent queued = std::move(queue.front());
    queue.pop_front();
    const v1::Event& event = StartDelivery(parts, std::move(queued), target, stream, now);
    stream.quarantined_id = event.id();
    EventsWire wire;
    wire.alone = true;
    AppendEventWire(event, event.ByteSizeLong(), &wire);
    parts.outbox.PushEvents(target, stream.stream, std::move(wire));
  }
}

const v1::Event& Dispatcher::StartDelivery(const Parts& parts, QueuedEvent queued,
                                           int64_t stream_id, StreamTable::Entry& stream,
                                           absl::Time now) {
  const absl::Duration timeout = config_.processors[queued.processor].timeout;
  if (stats_ != nullptr) {
    stats_->Dispatched(queued.processor, queued.type_index, now - queued.queued_at,
                       queued.redelivery);
  }
  queued.redelivery = false;
  --stream.credit;
  ++stream.in_flight;
  ++parts.counters.dispatched;
  return parts.in_flight.Start(std::move(queued), stream_id, now, timeout);
}

}  // namespace ferry
