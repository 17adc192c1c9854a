// WorkerStream: the engine's view of one open Process stream to a worker.
//
// The engine decides what to send; the implementation (server/workers/worker_pool.cc,
// or a fake in tests) only queues it for writing. Calls come after the engine
// released its mutex, from one thread at a time and in the order the engine
// queued them (core/engine/engine.h, Threading); implementations must still never
// block and never call back into the engine from inside these methods.
#ifndef FERRY_CORE_ENGINE_WORKER_STREAM_H_
#define FERRY_CORE_ENGINE_WORKER_STREAM_H_

#include <cstdint>
#include <string>
#include <vector>

#include "ferry/v1/processor.pb.h"

namespace ferry {

// One Events message, already serialized: the wire bytes of a v1::Events
// (each event as field 1: tag, length, the Event's bytes). The engine writes
// them straight from its in-flight events, so an event is never copied as a
// message on its way out; and two of them concatenated are one Events
// message holding both, which is how a stream coalesces small batches.
struct EventsWire {
  std::string bytes;
  int count = 0;  // events in `bytes`
  // Sent as a message of its own, never coalesced with another: it holds an
  // event redelivered after a lost stream (core/engine/redelivery.h).
  bool alone = false;
};

class WorkerStream {
 public:
  virtual ~WorkerStream() = default;
  // Queues one Events message. The engine never sends more events than the
  // credit the worker granted, so the implementation's queue stays bounded.
  virtual void SendEvents(EventsWire events) = 0;
  // Queues a Cancel for delivery ids the engine stopped waiting for.
  virtual void SendCancel(std::vector<uint64_t> ids) = 0;
  // For logs and status: "processor/target#n (worker_name)".
  virtual std::string Describe() const = 0;
};

}  // namespace ferry

#endif  // FERRY_CORE_ENGINE_WORKER_STREAM_H_
