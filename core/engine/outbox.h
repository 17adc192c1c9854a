// Outbox: messages for worker streams (Events, Cancel) queued by the Engine
// under its mutex and sent after the mutex is released, in the order queued
// (core/engine/engine.h, Threading). The Engine owns the outbox and runs the
// sending; this class is only the queue.
//
// Threading: not thread-safe; guarded by the Engine's mutex.
#ifndef FERRY_CORE_ENGINE_OUTBOX_H_
#define FERRY_CORE_ENGINE_OUTBOX_H_

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "core/engine/worker_stream.h"

namespace ferry {

class Outbox {
 public:
  // One queued message for a stream (events, or a cancel when `cancel`).
  struct Outgoing {
    int64_t stream_id = 0;
    WorkerStream* stream = nullptr;
    bool cancel = false;
    EventsWire events;
    std::vector<uint64_t> ids;

    // Sends it (after the Engine's mutex is released).
    void Send() {
      if (cancel) {
        stream->SendCancel(std::move(ids));
      } else {
        stream->SendEvents(std::move(events));
      }
    }
  };

  void PushEvents(int64_t stream_id, WorkerStream* stream, EventsWire events) {
    Outgoing out;
    out.stream_id = stream_id;
    out.stream = stream;
    out.events = std::move(events);
    queue_.push_back(std::move(out));
  }
  void PushCancel(int64_t stream_id, WorkerStream* stream, std::vector<uint64_t> ids) {
    Outgoing out;
    out.stream_id = stream_id;
    out.stream = stream;
    out.cancel = true;
    out.ids = std::move(ids);
    queue_.push_back(std::move(out));
  }
  // Drops the messages of a closed stream not yet taken by a sender.
  void DropStream(int64_t stream_id) {
    queue_.erase(std::remove_if(queue_.begin(), queue_.end(),
                                [stream_id](const Outgoing& out) {
                                  return out.stream_id == stream_id;
                                }),
                 queue_.end());
  }
  bool empty() const { return queue_.empty(); }
  // Moves everything queued into `round` (which must be empty).
  void TakeAll(std::vector<Outgoing>& round) { round.swap(queue_); }

 private:
  std::vector<Outgoing> queue_;
};

}  // namespace ferry

#endif  // FERRY_CORE_ENGINE_OUTBOX_H_
