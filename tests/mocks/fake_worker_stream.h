// FakeWorkerStream: records what the Engine sends to a worker stream, for
// unit tests of dispatch, credit and cancellation.
//
// Threading: not thread-safe; tests drive the engine from one thread.
#ifndef FERRY_TESTS_MOCKS_FAKE_WORKER_STREAM_H_
#define FERRY_TESTS_MOCKS_FAKE_WORKER_STREAM_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/engine/worker_stream.h"
#include "gtest/gtest.h"

namespace ferry::testing {

class FakeWorkerStream final : public WorkerStream {
 public:
  explicit FakeWorkerStream(std::string name) : name_(std::move(name)) {}

  void SendEvents(EventsWire wire) override {
    v1::Events events;
    // The engine's hand-made serialization must be a valid Events message
    // holding exactly `count` events.
    EXPECT_TRUE(events.ParseFromString(wire.bytes)) << "unparsable Events bytes";
    EXPECT_EQ(events.events_size(), wire.count);
    for (const v1::Event& event : events.events()) held_.push_back(event);
    batches_.push_back(std::move(events));
    alone_.push_back(wire.alone);
  }
  void SendCancel(std::vector<uint64_t> ids) override {
    cancelled_.insert(cancelled_.end(), ids.begin(), ids.end());
  }
  std::string Describe() const override { return name_; }

  // Every Events message received, in order.
  const std::vector<v1::Events>& batches() const { return batches_; }
  // Per message in batches(): whether the engine marked it EventsWire::alone.
  const std::vector<bool>& alone() const { return alone_; }
  // Events received and not yet taken by TakeHeld().
  const std::vector<v1::Event>& held() const { return held_; }
  std::vector<v1::Event> TakeHeld() { return std::exchange(held_, {}); }
  const std::vector<uint64_t>& cancelled() const { return cancelled_; }

 private:
  std::string name_;
  std::vector<v1::Events> batches_;
  std::vector<bool> alone_;
  std::vector<v1::Event> held_;
  std::vector<uint64_t> cancelled_;
};

}  // namespace ferry::testing

#endif  // FERRY_TESTS_MOCKS_FAKE_WORKER_STREAM_H_
