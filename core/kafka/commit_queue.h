// CommitQueue: offset commits that never block the consumer's poll thread.
//
// librdkafka's commitSync waits for the group coordinator's answer. Across a
// network partition (packets dropped, no RST) that answer takes until the
// request times out (socket.timeout.ms, 60 s by default) or longer, and a
// poll thread blocked that long cannot run the rebalance callback in which
// librdkafka reports the assignment lost once session.timeout.ms passed
// without a heartbeat: the replica would go on dispatching partitions the
// group has already given to another member. Here Send() hands the commit to
// librdkafka (rd_kafka_commit_queue on a queue of our own) and returns; the
// poll loop calls Serve() each round, which runs the callbacks of the
// commits answered meanwhile without waiting.
//
// The still-current check stays with the caller, on the poll thread, before
// Send(): librdkafka sends commits in order and stamps each with the group
// generation, so a commit sent before a revoke is either accepted before it
// or refused by the coordinator as from an old generation (fenced).
//
// Threading: every method on the consumer's poll thread; `done` callbacks
// run there too (from Serve() or FailAll()).
#ifndef FERRY_CORE_KAFKA_COMMIT_QUEUE_H_
#define FERRY_CORE_KAFKA_COMMIT_QUEUE_H_

#include <librdkafka/rdkafka.h>

#include <functional>
#include <map>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "core/engine/types.h"

namespace ferry {

class CommitQueue {
 public:
  using Done = std::function<void(const absl::Status&)>;

  // `rk` is the consumer's handle; it must outlive the queue.
  explicit CommitQueue(rd_kafka_t* rk);
  // Outstanding commits fail (FailAll) first.
  ~CommitQueue();
  CommitQueue(const CommitQueue&) = delete;
  CommitQueue& operator=(const CommitQueue&) = delete;

  // Sends `positions` (non-empty); `done` gets the coordinator's answer (a
  // per-partition error counts as the commit's error).
  void Send(const std::vector<CommitPosition>& positions, Done done);
  // Runs the callbacks of answered commits, waiting at most `wait` for one.
  void Serve(absl::Duration wait = absl::ZeroDuration());
  int outstanding() const { return static_cast<int>(pending_.size()); }
  // Fails every outstanding commit with `status` (their late answers are
  // ignored).
  void FailAll(const absl::Status& status);

 private:
  struct Ticket;
  static void OnCommit(rd_kafka_t* rk, rd_kafka_resp_err_t err,
                       rd_kafka_topic_partition_list_t* offsets, void* opaque);
  void Complete(uint64_t id, const absl::Status& status);

  rd_kafka_t* const rk_;
  rd_kafka_queue_t* const queue_;
  uint64_t next_id_ = 1;
  std::map<uint64_t, Done> pending_;
  // The opaque of every commit whose answer has not been served yet.
  std::map<uint64_t, std::unique_ptr<Ticket>> tickets_;
};

}  // namespace ferry

#endif  // FERRY_CORE_KAFKA_COMMIT_QUEUE_H_
