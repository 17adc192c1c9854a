#include "server/stop_sequence.h"

namespace ferry {

void StopSequence::Started(std::string name, std::function<void()> stop) {
  started_.push_back(name);
  running_.emplace_back(std::move(name), std::move(stop));
}

void StopSequence::StopAll() {
  while (!running_.empty()) {
    // Taken off the list before it runs: a stop action runs at most once,
    // even if StopAll is called again.
    auto [name, stop] = std::move(running_.back());
    running_.pop_back();
    stop();
    stopped_.push_back(std::move(name));
  }
}

}  // namespace ferry
