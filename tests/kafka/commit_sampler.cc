#include "tests/kafka/commit_sampler.h"

#include <map>
#include <utility>

#include "absl/strings/str_cat.h"

namespace ferry::testing {

CommitSampler::CommitSampler(std::string bootstrap, std::string topic, std::string group)
    : bootstrap_(std::move(bootstrap)), topic_(std::move(topic)), group_(std::move(group)) {
  thread_ = std::thread([this] { Run(); });
}

void CommitSampler::Stop() {
  if (!stop_.HasBeenNotified()) stop_.Notify();
  if (thread_.joinable()) thread_.join();
}

std::vector<CommitSampler::Sample> CommitSampler::samples() const {
  absl::MutexLock lock(&mu_);
  return samples_;
}

int64_t CommitSampler::errors() const {
  absl::MutexLock lock(&mu_);
  return errors_;
}

void CommitSampler::Run() {
  do {
    absl::StatusOr<test_tools::OffsetMap> committed =
        test_tools::ReadCommittedOffsets(bootstrap_, topic_, group_, absl::Seconds(5));
    absl::MutexLock lock(&mu_);
    if (committed.ok()) {
      samples_.push_back({absl::Now(), *std::move(committed)});
    } else {
      ++errors_;
    }
    // Polling interval; Stop() ends the wait at once.
  } while (!stop_.WaitForNotificationWithTimeout(absl::Milliseconds(100)));
}

std::vector<std::string> BackwardSteps(const std::vector<CommitSampler::Sample>& samples) {
  std::vector<std::string> steps;
  std::map<int32_t, std::pair<int64_t, absl::Time>> highest;
  for (const CommitSampler::Sample& sample : samples) {
    for (const auto& [partition, offset] : sample.committed) {
      auto it = highest.find(partition);
      if (it != highest.end() && offset < it->second.first) {
        steps.push_back(absl::StrCat("partition ", partition, ": committed offset went back from ",
                                     it->second.first, " (", absl::FormatTime(it->second.second),
                                     ") to ", offset, " (", absl::FormatTime(sample.time), ")"));
        continue;
      }
      highest[partition] = {offset, sample.time};
    }
  }
  return steps;
}

}  // namespace ferry::testing
