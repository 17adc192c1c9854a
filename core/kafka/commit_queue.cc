#include "core/kafka/commit_queue.h"

#include <utility>

#include "core/common/kafka_status.h"

namespace ferry {

// What a commit's callback needs to find its way back: the queue and the
// commit's id (the queue may have failed it already).
struct CommitQueue::Ticket {
  CommitQueue* queue;
  uint64_t id;
};

CommitQueue::CommitQueue(rd_kafka_t* rk) : rk_(rk), queue_(rd_kafka_queue_new(rk)) {}

CommitQueue::~CommitQueue() {
  FailAll(absl::CancelledError("the consumer stopped before the commit was answered"));
  // Answers still on their way are destroyed with the queue, unserved; their
  // tickets go with tickets_.
  rd_kafka_queue_destroy(queue_);
}

void CommitQueue::Send(const std::vector<CommitPosition>& positions, Done done) {
  rd_kafka_topic_partition_list_t* list =
      rd_kafka_topic_partition_list_new(static_cast<int>(positions.size()));
  for (const CommitPosition& position : positions) {
    rd_kafka_topic_partition_list_add(list, position.partition.topic.c_str(),
                                      position.partition.partition)
        ->offset = position.offset;
  }
  const uint64_t id = next_id_++;
  pending_.emplace(id, std::move(done));
  // Kept until its answer is served (OnCommit), even after FailAll, since
  // the answer still carries it; freed with the queue if it never comes.
  Ticket* ticket = tickets_.emplace(id, std::make_unique<Ticket>(Ticket{this, id}))
                       .first->second.get();
  const rd_kafka_resp_err_t err = rd_kafka_commit_queue(rk_, list, queue_, &OnCommit, ticket);
  rd_kafka_topic_partition_list_destroy(list);
  if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
    // Refused at once: no callback will come.
    tickets_.erase(id);
    Complete(id, KafkaErrorToStatus(static_cast<RdKafka::ErrorCode>(err), "commit"));
  }
}

void CommitQueue::Serve(absl::Duration wait) {
  if (pending_.empty()) return;
  rd_kafka_queue_poll_callback(queue_, static_cast<int>(absl::ToInt64Milliseconds(wait)));
}

void CommitQueue::FailAll(const absl::Status& status) {
  std::map<uint64_t, Done> failed;
  failed.swap(pending_);
  for (auto& [id, done] : failed) done(status);
}

void CommitQueue::OnCommit(rd_kafka_t* /*rk*/, rd_kafka_resp_err_t err,
                           rd_kafka_topic_partition_list_t* offsets, void* opaque) {
  auto* ticket = static_cast<Ticket*>(opaque);
  if (err == RD_KAFKA_RESP_ERR_NO_ERROR && offsets != nullptr) {
    for (int i = 0; i < offsets->cnt; ++i) {
      if (offsets->elems[i].err != RD_KAFKA_RESP_ERR_NO_ERROR) {
        err = offsets->elems[i].err;
        break;
      }
    }
  }
  CommitQueue* queue = ticket->queue;
  const uint64_t id = ticket->id;
  queue->tickets_.erase(id);  // frees `ticket`
  queue->Complete(id, KafkaErrorToStatus(static_cast<RdKafka::ErrorCode>(err), "commit"));
}

void CommitQueue::Complete(uint64_t id, const absl::Status& status) {
  auto it = pending_.find(id);
  if (it == pending_.end()) return;  // failed already
  Done done = std::move(it->second);
  pending_.erase(it);
  done(status);
}

}  // namespace ferry
