#include "core/engine/work_queues.h"

#include <algorithm>
#include <utility>

#include "core/engine/runs.h"

namespace ferry {

WorkQueues::WorkQueues(const Config& config, const SchedulingPlan& plan)
    : lane_count_(config.lane_count),
      flow_count_(plan.flow_count()),
      single_processor_(config.processors.size() == 1),
      lanes_(config.lane_count * plan.flow_count(), config.lane_capacity,
             static_cast<int>(config.lane_capacity * config.resume_fraction)),
      ready_lanes_(config.processors.size() * static_cast<size_t>(plan.flow_count())),
      lane_marked_ready_(static_cast<size_t>(lanes_.count()), false),
      unordered_(config.processors.size() * static_cast<size_t>(plan.flow_count())),
      quarantine_(config.processors.size()) {}

int WorkQueues::LaneFor(Ordering ordering, int flow, const v1::Event& event) const {
  if (ordering == Ordering::kUnordered) return -1;
  return flow * lane_count_ + Lanes<QueuedEvent>::LaneFor(ordering, event.topic(),
                                                          event.partition(), event.key(),
                                                          lane_count_);
}

void WorkQueues::Enqueue(QueuedEvent queued, bool front) {
  if (queued.lane < 0) {
    auto& queue = unordered_[QueueIndex(queued.processor, queued.flow)];
    if (front) {
      queue.push_front(std::move(queued));
    } else {
      queue.push_back(std::move(queued));
    }
    return;
  }
  const int lane = queued.lane;
  if (front && queued.run_id != 0) {
    const uint64_t run_id = queued.run_id;
    const int position = queued.run_position;
    lanes_.InsertNearFront(lane, std::move(queued), [run_id, position](const QueuedEvent& waiting) {
      return LinesUpBefore(waiting, run_id, position);
    });
  } else if (front) {
    lanes_.PushFront(lane, std::move(queued));
  } else {
    lanes_.PushBack(lane, std::move(queued));
  }
  MarkLaneReady(lane);
}

void WorkQueues::MarkLaneReady(int lane) {
  if (lane_marked_ready_[lane] || lanes_.busy(lane) || lanes_.empty(lane)) return;
  lane_marked_ready_[lane] = true;
  // With one processor the head's processor is known without touching the
  // head (a cache miss per dispatch across thousands of lanes).
  const int processor = single_processor_ ? 0 : lanes_.Front(lane).processor;
  ready_lanes_[QueueIndex(processor, lane / lane_count_)].push_back(lane);
}

void WorkQueues::ReleaseLane(const QueuedEvent& queued) {
  if (queued.lane < 0) return;
  lanes_.RemoveInFlight(queued.lane);
  MarkLaneReady(queued.lane);
}

void WorkQueues::MarkAllLanesReady() {
  for (int lane = 0; lane < lanes_.count(); ++lane) MarkLaneReady(lane);
}

bool WorkQueues::HasWork(int processor, int flow) const {
  const size_t queue = QueueIndex(processor, flow);
  return !ready_lanes_[queue].empty() || !unordered_[queue].empty();
}

std::optional<QueuedEvent> WorkQueues::Take(int processor, int flow) {
  const size_t queue = QueueIndex(processor, flow);
  auto& ready = ready_lanes_[queue];
  while (!ready.empty()) {
    const int lane = ready.front();
    ready.pop_front();
    lane_marked_ready_[lane] = false;
    if (lanes_.busy(lane) || lanes_.empty(lane)) continue;
    if (!single_processor_ && lanes_.Front(lane).processor != processor) {
      MarkLaneReady(lane);  // its head now belongs to another processor
      continue;
    }
    QueuedEvent taken = lanes_.PopFront(lane);
    lanes_.AddInFlight(lane);
    return taken;
  }
  auto& unordered = unordered_[queue];
  if (unordered.empty()) return std::nullopt;
  QueuedEvent taken = std::move(unordered.front());
  unordered.pop_front();
  return taken;
}

const QueuedEvent* WorkQueues::PeekRunMember(const QueuedEvent& head) const {
  if (head.lane < 0 || lanes_.empty(head.lane)) return nullptr;
  const QueuedEvent& next = lanes_.Front(head.lane);
  if (next.processor != head.processor || next.strikes > 0) return nullptr;
  return &next;
}

QueuedEvent WorkQueues::TakeRunMember(int lane) {
  QueuedEvent taken = lanes_.PopFront(lane);
  lanes_.AddInFlight(lane);
  return taken;
}

void WorkQueues::RemoveQueuedIf(const std::function<bool(const QueuedEvent&)>& match,
                                const std::function<void(QueuedEvent)>& removed) {
  for (int lane = 0; lane < lanes_.count(); ++lane) {
    for (QueuedEvent& queued : lanes_.RemoveIf(lane, match)) removed(std::move(queued));
  }
  for (auto& queue : unordered_) {
    std::deque<QueuedEvent> kept;
    for (QueuedEvent& queued : queue) {
      if (match(queued)) {
        removed(std::move(queued));
      } else {
        kept.push_back(std::move(queued));
      }
    }
    queue.swap(kept);
  }
}

void WorkQueues::Quarantine(QueuedEvent queued) {
  quarantine_[static_cast<size_t>(queued.processor)].push_back(std::move(queued));
}

std::vector<QueuedEvent> WorkQueues::TakeQuarantinedIf(
    const std::function<bool(const QueuedEvent&)>& match) {
  std::vector<QueuedEvent> taken;
  for (std::deque<QueuedEvent>& queue : quarantine_) {
    for (auto it = queue.begin(); it != queue.end();) {
      if (match(*it)) {
        taken.push_back(std::move(*it));
        it = queue.erase(it);
      } else {
        ++it;
      }
    }
  }
  return taken;
}

void WorkQueues::AddToSnapshot(EngineSnapshot* snapshot) const {
  for (int lane = 0; lane < lanes_.count(); ++lane) {
    const int64_t size = static_cast<int64_t>(lanes_.size(lane));
    snapshot->queued_events += size;
    snapshot->longest_lane = std::max(snapshot->longest_lane, size);
    if (size > 0 || lanes_.busy(lane)) ++snapshot->lanes_in_use;
  }
  for (const auto& queue : unordered_) {
    snapshot->queued_events += static_cast<int64_t>(queue.size());
  }
  for (const auto& queue : quarantine_) {
    snapshot->queued_events += static_cast<int64_t>(queue.size());
  }
}

}  // namespace ferry
