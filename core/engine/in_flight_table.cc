#include "core/engine/in_flight_table.h"

#include <utility>

namespace ferry {
namespace {

constexpr int kSequenceBits = 40;
constexpr uint64_t kSequenceMask = (uint64_t{1} << kSequenceBits) - 1;

}  // namespace

uint64_t InFlightTable::MakeDeliveryId(uint64_t epoch, uint64_t sequence) {
  return ((epoch & 0xFFFFFF) << kSequenceBits) | (sequence & kSequenceMask);
}

const v1::Event& InFlightTable::Start(QueuedEvent&& queued, int64_t stream_id, absl::Time now,
                                      absl::Duration timeout) {
  const uint64_t id = MakeDeliveryId(queued.epoch, next_sequence_++);
  queued.event->set_id(id);
  queued.event->set_deadline_ms(absl::ToUnixMillis(now + timeout));
  // Built in place: a default Delivery would allocate an Event only to
  // drop it for this one.
  const auto placed =
      deliveries_.try_emplace(id, Delivery{std::move(queued), stream_id, now + timeout, now});
  return *placed.first->second.queued.event;
}

InFlightTable::Delivery* InFlightTable::Find(uint64_t id, int64_t stream_id) {
  auto it = deliveries_.find(id);
  return it == deliveries_.end() || it->second.stream_id != stream_id ? nullptr : &it->second;
}

InFlightTable::Delivery InFlightTable::Take(uint64_t id) {
  auto it = deliveries_.find(id);
  Delivery delivery = std::move(it->second);
  deliveries_.erase(it);
  return delivery;
}

std::vector<std::pair<uint64_t, InFlightTable::Delivery>> InFlightTable::TakeExpired(
    absl::Time now) {
  std::vector<std::pair<uint64_t, Delivery>> expired;
  for (auto it = deliveries_.begin(); it != deliveries_.end();) {
    if (it->second.deadline > now) {
      ++it;
      continue;
    }
    expired.emplace_back(it->first, std::move(it->second));
    deliveries_.erase(it++);
  }
  return expired;
}

std::vector<QueuedEvent> InFlightTable::TakeStream(int64_t stream_id) {
  std::vector<QueuedEvent> taken;
  for (auto it = deliveries_.begin(); it != deliveries_.end();) {
    if (it->second.stream_id == stream_id) {
      taken.push_back(std::move(it->second.queued));
      deliveries_.erase(it++);
    } else {
      ++it;
    }
  }
  return taken;
}

std::optional<std::pair<uint64_t, InFlightTable::Delivery>> InFlightTable::TakeOffset(
    const TopicPartition& tp, int64_t offset, uint64_t epoch) {
  for (auto it = deliveries_.begin(); it != deliveries_.end(); ++it) {
    const QueuedEvent& queued = it->second.queued;
    if (!queued.Is(tp, offset) || queued.epoch != epoch) continue;
    std::pair<uint64_t, Delivery> taken{it->first, std::move(it->second)};
    deliveries_.erase(it);
    return taken;
  }
  return std::nullopt;
}

void InFlightTable::RemoveIf(const std::function<bool(const QueuedEvent&)>& match,
                             const std::function<void(Delivery&&)>& removed) {
  for (auto it = deliveries_.begin(); it != deliveries_.end();) {
    if (match(it->second.queued)) {
      removed(std::move(it->second));
      deliveries_.erase(it++);
    } else {
      ++it;
    }
  }
}

int64_t InFlightTable::CountIf(const std::function<bool(const v1::Event&)>& match) const {
  int64_t count = 0;
  for (const auto& [id, delivery] : deliveries_) count += match(*delivery.queued.event) ? 1 : 0;
  return count;
}

std::map<TopicPartition, int64_t> InFlightTable::CountByPartition() const {
  std::map<TopicPartition, int64_t> counts;
  for (const auto& [id, delivery] : deliveries_) ++counts[delivery.queued.partition()];
  return counts;
}

}  // namespace ferry
