// Scheduling: which queued event a processor's free worker credit goes to.
//
// Events are grouped into *flows*: one flow per (topic, priority class). Each
// flow has its own key lanes (see core/engine/lanes.h) and its own unordered queue,
// so a backlog in one flow never sits in front of another flow's events.
//
// When a processor has credit, the dispatcher asks the Scheduler for the next
// flow to serve:
//   * across priority classes: smooth weighted round-robin (the nginx
//     algorithm). Among the classes that have an event ready, each pick adds
//     every such class's weight to its score, serves the class with the
//     highest score and takes the sum of those weights off its score. With a
//     steady set of busy classes a class of weight w gets exactly w of every
//     W picks (W: the sum of their weights), interleaved rather than in
//     bursts; a class with nothing ready is skipped and its share goes to the
//     others (an idle class lends its share); and a class with work is served
//     at least once in every W picks, so none starves.
//   * inside a class: round-robin across its flows (its topics), one event per
//     turn, so a small topic is served every few picks however large the
//     backlog of a big topic of the same class.
//   * inside a flow: the existing order (ready lanes round-robin, or the
//     unordered FIFO).
//
// SchedulingPlan is the static part (built once from the Config): topic and
// event type -> flow, class weights, and delays (topics[].delay, delays).
//
// Threading: not thread-safe; the engine guards it.
#ifndef FERRY_CORE_ENGINE_SCHEDULER_H_
#define FERRY_CORE_ENGINE_SCHEDULER_H_

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/time/time.h"
#include "core/config/config.h"

namespace ferry {

// Smooth weighted round-robin over a fixed set of classes.
class WeightedRoundRobin {
 public:
  explicit WeightedRoundRobin(std::vector<int> weights)
      : weights_(std::move(weights)), score_(weights_.size(), 0) {}

  int size() const { return static_cast<int>(weights_.size()); }
  // The class the next pick serves among those with active[c] true (-1 when
  // none is). Changes nothing: the caller may find the class has nothing
  // after all and ask again with it inactive.
  int Choose(const std::vector<bool>& active) const;
  // Records a pick of `chosen` (as returned by Choose with the same `active`).
  void Commit(const std::vector<bool>& active, int chosen);

 private:
  std::vector<int> weights_;
  std::vector<int64_t> score_;
};

class SchedulingPlan {
 public:
  explicit SchedulingPlan(const Config& config);

  // Where an event of `topic` with `type` is queued and how long it waits
  // after its timestamp.
  struct Route {
    int flow = 0;
    absl::Duration delay = absl::ZeroDuration();
  };
  Route RouteFor(const std::string& topic, const std::string& type) const;

  int flow_count() const { return static_cast<int>(flow_class_.size()); }
  int class_count() const { return static_cast<int>(weights_.size()); }
  const std::vector<int>& weights() const { return weights_; }
  const std::string& class_name(int c) const { return class_names_[c]; }
  int class_of_flow(int flow) const { return flow_class_[flow]; }
  // The flows of class `c`, in topic order (the round-robin order).
  const std::vector<int>& flows_of_class(int c) const { return flows_of_class_[c]; }
  // True when any topic delays any event (the delay stage is in use).
  bool has_delays() const { return has_delays_; }

 private:
  struct TopicPlan {
    int topic_slot = 0;
    int class_index = 0;
    absl::Duration delay = absl::ZeroDuration();
    std::map<std::string, absl::Duration> delays;
  };
  int FlowOf(int topic_slot, int class_index) const;

  std::vector<std::string> class_names_;
  std::vector<int> weights_;
  std::map<std::string, TopicPlan> topics_;
  TopicPlan other_topic_;  // records of topics not in the config
  std::map<std::string, int> class_by_type_;
  // (topic slot, class) -> flow.
  std::map<std::pair<int, int>, int> flow_index_;
  std::vector<int> flow_class_;
  std::vector<std::vector<int>> flows_of_class_;
  bool has_delays_ = false;
};

// Per processor: the class and flow to serve next.
class Scheduler {
 public:
  Scheduler(const SchedulingPlan& plan, int processors);

  // The next event for `processor`: picks a class by weighted round-robin
  // among classes with a flow for which has_work(flow) is true, then the
  // flows of that class round-robin, calling take(flow) (returning
  // std::optional<Item>) until one yields an event. A class whose flows all
  // yield nothing is set aside for this pick (and not charged). Empty when
  // no flow yields anything.
  template <typename HasWork, typename Take>
  auto Next(int processor, const HasWork& has_work, const Take& take) -> decltype(take(0));

 private:
  struct PerProcessor {
    WeightedRoundRobin wrr;
    std::vector<size_t> cursor;  // per class: the next flow's index
    std::vector<bool> active;    // per class, scratch for Next()
  };
  const SchedulingPlan& plan_;
  std::vector<PerProcessor> processors_;
};

template <typename HasWork, typename Take>
auto Scheduler::Next(int processor, const HasWork& has_work, const Take& take)
    -> decltype(take(0)) {
  PerProcessor& state = processors_[static_cast<size_t>(processor)];
  const int classes = plan_.class_count();
  std::vector<bool>& active = state.active;
  active.assign(static_cast<size_t>(classes), false);
  bool any = false;
  for (int c = 0; c < classes; ++c) {
    for (int flow : plan_.flows_of_class(c)) {
      if (has_work(flow)) {
        active[static_cast<size_t>(c)] = true;
        any = true;
        break;
      }
    }
  }
  if (!any) return {};
  while (true) {
    const int c = state.wrr.Choose(active);
    if (c < 0) return {};
    const std::vector<int>& flows = plan_.flows_of_class(c);
    size_t& cursor = state.cursor[static_cast<size_t>(c)];
    for (size_t k = 0; k < flows.size(); ++k) {
      const size_t index = (cursor + k) % flows.size();
      if (!has_work(flows[index])) continue;
      auto taken = take(flows[index]);
      if (!taken.has_value()) continue;
      cursor = index + 1;
      state.wrr.Commit(active, c);
      return taken;
    }
    active[static_cast<size_t>(c)] = false;
  }
}

}  // namespace ferry

#endif  // FERRY_CORE_ENGINE_SCHEDULER_H_
