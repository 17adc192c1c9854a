#include "core/engine/dispatcher.h"

#include <algorithm>
#include <cstddef>
#include <deque>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "core/engine/engine_stats.h"
#include "core/engine/event_prefetch.h"
#include "core/engine/events_wire.h"

namespace ferry {
namespace {

// A run's members, asked for at once before they are serialized
// (perf: Event::_InternalSerialize fell from 6.8% to 0.9% of ferry's KEY
// samples; bench/RESULTS.md).
void PrefetchForWire(const std::vector<QueuedEvent>& members) {
  constexpr size_t kMostBytes = 512;  // a payload's first lines; the rest streams
  absl::InlinedVector<const v1::Event*, 64> events;
  for (const QueuedEvent& member : members) events.push_back(member.event.get());
  PrefetchEvents(events, kMostBytes);
}

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
  for (int processor = 0; processor < static_cast<int>(config_.processors.size()); ++processor) {
    int64_t allowance = std::numeric_limits<int64_t>::max();
    if (parts.guards.active(processor)) {
      allowance = parts.guards.Allowance(processor, parts.streams.InFlightOf(processor), now);
      if (allowance <= 0) continue;
    }
    // Events whose streams keep being lost go first, each to a stream of its
    // own (core/engine/redelivery.h).
    DispatchQuarantined(parts, processor, now, allowance);
    DispatchProcessor(parts, processor, now, allowance);
  }
}

bool Dispatcher::HasRoom(const Parts& parts, const StreamTable::Entry& stream,
                         int64_t cap) const {
  return stream.ready && stream.credit > 0 && stream.in_flight < cap && !stream.reserved &&
         !HoldsQuarantined(parts.in_flight, stream);
}

void Dispatcher::DispatchProcessor(const Parts& parts, int processor, absl::Time now,
                                   int64_t& allowance) {
  if (allowance <= 0) return;
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
  while (!candidates.empty() && allowance > 0) {
    // Next event: by priority class and flow (core/engine/scheduler.h).
    std::optional<QueuedEvent> taken = parts.scheduler.Next(processor, has_work, take);
    if (!taken.has_value()) break;

    if (next >= candidates.size()) next = 0;
    const int64_t stream_id = candidates[next];
    StreamTable::Entry& stream = *parts.streams.Find(stream_id);
    Batches::Batch* batch = &batches.For(stream_id, stream.stream);
    // An event redelivered after a lost stream travels alone
    // (core/engine/redelivery.h).
    const bool alone = taken->strikes > 0;
    const int64_t longest =
        std::min(allowance, RunLength(stream.max_run, stream.credit, cap - stream.in_flight,
                                      processor_config.max_batch));
    bool sent_as_run = false;
    if (!alone && longest > 1 && taken->lane >= 0) {
      const int64_t run_bytes =
          GatherRun(parts, std::move(*taken), longest, processor_config.max_batch_bytes);
      sent_as_run = run_scratch_.size() > 1;
      if (sent_as_run) {
        allowance -= static_cast<int64_t>(run_scratch_.size());
        SendRun(parts, stream_id, stream, batches, run_bytes, now);
      } else {
        taken = std::move(run_scratch_.front());  // nothing may follow it
      }
      run_scratch_.clear();
    }
    if (!sent_as_run) {
      --allowance;
      const int64_t unstamped = taken->unstamped_size;
      const v1::Event& event = StartDelivery(parts, std::move(*taken), stream_id, stream, now);
      const size_t event_size = DeliveredSize(event, unstamped);
      if (alone || static_cast<int64_t>(batch->events.bytes.size() + event_size) + kEventFraming >
                       processor_config.max_batch_bytes) {
        batches.Flush(*batch);
      }
      AppendEventWire(event, event_size, &batch->events);
      if (alone) {
        batch->events.alone = true;
        batches.Flush(*batch);
      }
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

namespace {

// An event's wire size once sent, at most, with its framing: whatever the
// delivery stamps (core/engine/events_wire.h).
int64_t EstimatedWireSize(const QueuedEvent& queued) {
  const int64_t unstamped = queued.unstamped_size >= 0 ? queued.unstamped_size
                                                       : UnstampedWireSize(*queued.event);
  return unstamped + kMaxStampedFieldsSize + kEventFraming;
}

}  // namespace

int64_t Dispatcher::GatherRun(const Parts& parts, QueuedEvent head, int64_t longest,
                              int64_t max_bytes) {
  int64_t bytes = EstimatedWireSize(head);
  run_scratch_.push_back(std::move(head));
  while (static_cast<int64_t>(run_scratch_.size()) < longest) {
    const QueuedEvent* follower = parts.queues.PeekRunMember(run_scratch_.front());
    if (follower == nullptr) break;
    const int64_t size = EstimatedWireSize(*follower);
    if (bytes + size > max_bytes) break;  // the whole run must fit one message
    bytes += size;
    run_scratch_.push_back(parts.queues.TakeRunMember(follower->lane));
  }
  return bytes;
}

void Dispatcher::SendRun(const Parts& parts, int64_t stream_id, StreamTable::Entry& stream,
                         Batches& batches, int64_t run_bytes, absl::Time now) {
  const int processor = run_scratch_.front().processor;
  const ProcessorConfig& processor_config = config_.processors[static_cast<size_t>(processor)];
  const int64_t members = static_cast<int64_t>(run_scratch_.size());
  Batches::Batch& batch = batches.For(stream_id, stream.stream);
  // A run is never split across Events messages: start a new one unless it
  // fits whole in the current one.
  if (batch.events.count + members > processor_config.max_batch ||
      static_cast<int64_t>(batch.events.bytes.size()) + run_bytes >
          processor_config.max_batch_bytes) {
    batches.Flush(batch);
  }
  // Room for the whole run at once (run_bytes bounds its wire size): the
  // message's bytes are not regrown, and copied, while its members go in.
  batch.events.bytes.reserve(batch.events.bytes.size() + static_cast<size_t>(run_bytes));
  const uint64_t run_id = run_ids_.Next();
  PrefetchForWire(run_scratch_);
  for (int64_t i = 0; i < members; ++i) {
    QueuedEvent& member = run_scratch_[static_cast<size_t>(i)];
    const int64_t unstamped = member.unstamped_size;
    const v1::Event& event = StartDelivery(parts, std::move(member), stream_id, stream, now,
                                           run_id, static_cast<int>(i + 1));
    AppendEventWire(event, DeliveredSize(event, unstamped), &batch.events);
  }
  ++parts.counters.runs;
  parts.counters.run_events += members;
  if (stats_ != nullptr) stats_->Run(processor, members);
}

void Dispatcher::DispatchQuarantined(const Parts& parts, int processor, absl::Time now,
                                     int64_t& allowance) {
  std::deque<QueuedEvent>& queue = parts.queues.quarantine(processor);
  while (!queue.empty() && allowance > 0) {
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
    --allowance;
    const int64_t unstamped = queued.unstamped_size;
    const v1::Event& event = StartDelivery(parts, std::move(queued), target, stream, now);
    stream.quarantined_id = event.id();
    EventsWire wire;
    wire.alone = true;
    AppendEventWire(event, DeliveredSize(event, unstamped), &wire);
    parts.outbox.PushEvents(target, stream.stream, std::move(wire));
  }
}

const v1::Event& Dispatcher::StartDelivery(const Parts& parts, QueuedEvent&& queued,
                                           int64_t stream_id, StreamTable::Entry& stream,
                                           absl::Time now, uint64_t run_id, int run_position) {
  // A run's k-th member gets k timeouts from now (core/engine/runs.h).
  const absl::Duration timeout =
      MemberTimeout(config_.processors[queued.processor].timeout, run_position);
  queued.run_id = run_id;
  queued.run_position = run_position;
  queued.event->set_run_id(run_id);
  if (stats_ != nullptr) {
    stats_->DeferDispatched(queued.processor, queued.type_index, now - queued.queued_at,
                            queued.redelivery);
  }
  queued.redelivery = false;
  parts.guards.OnDispatched(queued.processor);
  --stream.credit;
  ++stream.in_flight;
  ++parts.counters.dispatched;
  return parts.in_flight.Start(std::move(queued), stream_id, now, timeout);
}

}  // namespace ferry
