// CommitSampler: samples a consumer group's committed offsets of one topic
// every 100 ms on its own thread, for tests that check that committed
// offsets never go backwards while members join, leave or are cut off.
//
// Threading: construct, samples(), errors() and Stop() from any thread; the
// sampling thread is joined by Stop() or the destructor.
#ifndef FERRY_TESTS_KAFKA_COMMIT_SAMPLER_H_
#define FERRY_TESTS_KAFKA_COMMIT_SAMPLER_H_

#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "tests/tools/kafka_admin.h"

namespace ferry::testing {

class CommitSampler {
 public:
  struct Sample {
    absl::Time time;
    test_tools::OffsetMap committed;
  };

  CommitSampler(std::string bootstrap, std::string topic, std::string group);
  ~CommitSampler() { Stop(); }
  CommitSampler(const CommitSampler&) = delete;
  CommitSampler& operator=(const CommitSampler&) = delete;

  void Stop();
  std::vector<Sample> samples() const;
  // Reads that failed (the broker did not answer in time).
  int64_t errors() const;

 private:
  void Run();

  const std::string bootstrap_;
  const std::string topic_;
  const std::string group_;
  absl::Notification stop_;
  mutable absl::Mutex mu_;
  std::vector<Sample> samples_ ABSL_GUARDED_BY(mu_);
  int64_t errors_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread thread_;
};

// Every step where a partition's committed offset is lower than in an
// earlier sample, described ("partition 3: committed offset went back from
// 120 (time) to 80 (time)"); empty when offsets only moved forward.
std::vector<std::string> BackwardSteps(const std::vector<CommitSampler::Sample>& samples);

}  // namespace ferry::testing

#endif  // FERRY_TESTS_KAFKA_COMMIT_SAMPLER_H_
