#include "core/engine/scheduler.h"

#include <algorithm>

namespace ferry {

int WeightedRoundRobin::Choose(const std::vector<bool>& active) const {
  int chosen = -1;
  int64_t best = 0;
  for (int c = 0; c < size(); ++c) {
    if (!active[static_cast<size_t>(c)]) continue;
    const int64_t score = score_[static_cast<size_t>(c)] + weights_[static_cast<size_t>(c)];
    // Ties go to the lower index (the class listed first).
    if (chosen < 0 || score > best) {
      chosen = c;
      best = score;
    }
  }
  return chosen;
}

void WeightedRoundRobin::Commit(const std::vector<bool>& active, int chosen) {
  int64_t total = 0;
  for (int c = 0; c < size(); ++c) {
    if (!active[static_cast<size_t>(c)]) continue;
    score_[static_cast<size_t>(c)] += weights_[static_cast<size_t>(c)];
    total += weights_[static_cast<size_t>(c)];
  }
  // Scores of the active classes sum to what they summed to before, so no
  // class drifts: every score stays within one total weight of zero.
  score_[static_cast<size_t>(chosen)] -= total;
}

SchedulingPlan::SchedulingPlan(const Config& config) {
  std::map<std::string, int> class_index;
  for (const PriorityClass& c : config.priority_classes) {
    class_index[c.name] = static_cast<int>(class_names_.size());
    class_names_.push_back(c.name);
    weights_.push_back(std::max(1, c.weight));
  }
  if (class_names_.empty()) {
    class_index["default"] = 0;
    class_names_.push_back("default");
    weights_.push_back(1);
  }
  auto class_of = [&class_index](const std::string& name) {
    auto it = class_index.find(name);
    return it != class_index.end() ? it->second : -1;
  };
  int default_class = config.default_priority.empty() ? 0 : class_of(config.default_priority);
  if (default_class < 0) default_class = 0;
  for (const auto& [type, name] : config.priority_by_type) {
    const int c = class_of(name);
    if (c >= 0) class_by_type_[type] = c;
  }

  // Topic slots: the configured topics in order, then "other".
  int slot = 0;
  for (const TopicConfig& topic : config.topics) {
    TopicPlan& plan = topics_[topic.name];
    plan.topic_slot = slot++;
    const int c = topic.priority.empty() ? default_class : class_of(topic.priority);
    plan.class_index = c < 0 ? default_class : c;
    plan.delay = topic.delay;
    plan.delays = topic.delays;
    has_delays_ = has_delays_ || topic.delay > absl::ZeroDuration();
    for (const auto& [type, delay] : topic.delays) {
      has_delays_ = has_delays_ || delay > absl::ZeroDuration();
    }
  }
  other_topic_.topic_slot = slot++;
  other_topic_.class_index = default_class;

  // Flows: each topic's own class, plus every class an event type maps to
  // (any topic may carry that type).
  std::vector<bool> type_classes(weights_.size(), false);
  for (const auto& [type, c] : class_by_type_) type_classes[static_cast<size_t>(c)] = true;
  flows_of_class_.resize(weights_.size());
  auto add_flows = [this, &type_classes](const TopicPlan& plan) {
    for (int c = 0; c < class_count(); ++c) {
      if (c != plan.class_index && !type_classes[static_cast<size_t>(c)]) continue;
      const int flow = static_cast<int>(flow_class_.size());
      flow_index_[{plan.topic_slot, c}] = flow;
      flow_class_.push_back(c);
      flows_of_class_[static_cast<size_t>(c)].push_back(flow);
    }
  };
  std::vector<const TopicPlan*> in_order(topics_.size());
  for (const auto& [name, plan] : topics_) in_order[static_cast<size_t>(plan.topic_slot)] = &plan;
  for (const TopicPlan* plan : in_order) add_flows(*plan);
  add_flows(other_topic_);
}

int SchedulingPlan::FlowOf(int topic_slot, int class_index) const {
  auto it = flow_index_.find({topic_slot, class_index});
  return it != flow_index_.end() ? it->second : 0;
}

SchedulingPlan::Route SchedulingPlan::RouteFor(const std::string& topic,
                                               const std::string& type) const {
  auto it = topics_.find(topic);
  const TopicPlan& plan = it != topics_.end() ? it->second : other_topic_;
  Route route;
  int c = plan.class_index;
  if (!class_by_type_.empty()) {
    auto by_type = class_by_type_.find(type);
    if (by_type != class_by_type_.end()) c = by_type->second;
  }
  route.flow = FlowOf(plan.topic_slot, c);
  route.delay = plan.delay;
  if (!plan.delays.empty()) {
    auto delay = plan.delays.find(type);
    if (delay != plan.delays.end()) route.delay = delay->second;
  }
  return route;
}

Scheduler::Scheduler(const SchedulingPlan& plan, int processors) : plan_(plan) {
  for (int p = 0; p < processors; ++p) {
    processors_.push_back(PerProcessor{WeightedRoundRobin(plan.weights()),
                                       std::vector<size_t>(plan.weights().size(), 0),
                                       std::vector<bool>(plan.weights().size(), false)});
  }
}

}  // namespace ferry
