// OffsetCommitter: the seam between the Committer and Kafka, so the commit
// schedule can be tested without a broker.
//
// Threading: implementations must allow Commit from a thread other than the
// consumer's poll thread (librdkafka's commit is thread-safe).
#ifndef FERRY_CORE_ENGINE_OFFSET_COMMITTER_H_
#define FERRY_CORE_ENGINE_OFFSET_COMMITTER_H_

#include <vector>

#include "absl/status/status.h"
#include "core/engine/types.h"

namespace ferry {

class OffsetCommitter {
 public:
  virtual ~OffsetCommitter() = default;
  // Commits synchronously. Each position's offset is the next offset to read.
  virtual absl::Status Commit(const std::vector<CommitPosition>& positions) = 0;
};

}  // namespace ferry

#endif  // FERRY_CORE_ENGINE_OFFSET_COMMITTER_H_
