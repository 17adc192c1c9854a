// Test support for the C++ worker SDK's tests: a real gRPC client stream
// speaking ferry's side of the Processor protocol (Client), a Worker started
// on a free port (StartWorker), default options and a multi-thread Latch.
//
// Threading: a Client is used by one test thread; Latch from any thread.
#ifndef FERRY_CLIENTS_CPP_WORKER_TEST_SUPPORT_H_
#define FERRY_CLIENTS_CPP_WORKER_TEST_SUPPORT_H_

#include <atomic>
#include <map>
#include <memory>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "ferry/v1/processor.grpc.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "clients/cpp/worker.h"

namespace ferry::sdk::testing {

using ferry::v1::Event;
using ferry::v1::ProcessRequest;
using ferry::v1::ProcessResponse;
using ferry::v1::Result;

// A notification that many threads may fire.
class Latch {
 public:
  void Notify() {
    if (!fired_.exchange(true)) n_.Notify();
  }
  void WaitForNotification() { n_.WaitForNotification(); }
  // False if it did not fire within `timeout`.
  bool WaitFor(absl::Duration timeout) { return n_.WaitForNotificationWithTimeout(timeout); }

 private:
  std::atomic<bool> fired_{false};
  absl::Notification n_;
};

// A client stream to a worker, as ferry would open it.
class Client {
 public:
  // `results_credit`: send `ferry-results-credit: 1`, as ferry does, so the
  // worker may carry credit inside Results.
  explicit Client(int port,
                  std::shared_ptr<grpc::ChannelCredentials> credentials =
                      grpc::InsecureChannelCredentials(),
                  bool results_credit = false)
      : results_credit_(results_credit) {
    channel_ = grpc::CreateChannel("127.0.0.1:" + std::to_string(port), credentials);
    stub_ = ferry::v1::Processor::NewStub(channel_);
    if (results_credit) context_.AddMetadata("ferry-results-credit", "1");
    stream_ = stub_->Process(&context_);
  }

  grpc::ClientReaderWriter<ProcessRequest, ProcessResponse>& stream() { return *stream_; }
  grpc::ClientContext& context() { return context_; }

  // Reads the first message; it must be Ready.
  ferry::v1::Ready ReadReady() {
    ProcessResponse msg;
    EXPECT_TRUE(stream_->Read(&msg));
    EXPECT_EQ(msg.kind_case(), ProcessResponse::kReady);
    return msg.ready();
  }

  bool SendEvents(const std::vector<uint64_t>& ids, const std::vector<std::string>& payloads = {}) {
    ProcessRequest req;
    for (size_t i = 0; i < ids.size(); ++i) {
      Event* e = req.mutable_events()->add_events();
      e->set_id(ids[i]);
      e->set_key("k" + std::to_string(ids[i]));
      e->set_payload(i < payloads.size() ? payloads[i] : "p");
      e->set_attempt(1);
    }
    return stream_->Write(req);
  }

  bool SendCancel(const std::vector<uint64_t>& ids) {
    ProcessRequest req;
    for (uint64_t id : ids) req.mutable_cancel()->add_ids(id);
    return stream_->Write(req);
  }

  // Reads until `want` more units of credit arrived; collects results by id.
  // False if the stream ended first.
  bool ReadCredit(int64_t want) {
    int64_t got = 0;
    while (got < want) {
      ProcessResponse msg;
      if (!stream_->Read(&msg)) return false;
      if (msg.has_credit()) {
        got += msg.credit().n();
        credit_total += msg.credit().n();
        ++credit_messages;
      } else if (msg.has_results()) {
        ++results_messages;
        // Only a client that sent the header may get credit here: an older
        // ferry would ignore it and starve.
        if (!results_credit_) {
          EXPECT_EQ(msg.results().credit(), 0u);
        }
        got += msg.results().credit();
        credit_total += msg.results().credit();
        for (const Result& r : msg.results().results()) {
          EXPECT_EQ(results.count(r.id()), 0u) << "duplicate result for " << r.id();
          results[r.id()] = r;
        }
      } else {
        ADD_FAILURE() << "unexpected message " << msg.ShortDebugString();
      }
    }
    return true;
  }

  std::set<uint64_t> ResultIds() const {
    std::set<uint64_t> ids;
    for (const auto& [id, r] : results) ids.insert(id);
    return ids;
  }

  std::map<uint64_t, Result> results;
  int64_t credit_total = 0;
  int credit_messages = 0;
  int results_messages = 0;

 private:
  const bool results_credit_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<ferry::v1::Processor::Stub> stub_;
  grpc::ClientContext context_;
  std::unique_ptr<grpc::ClientReaderWriter<ProcessRequest, ProcessResponse>> stream_;
};

template <typename H>
std::unique_ptr<Worker> StartWorker(WorkerOptions opts, H handler) {
  auto worker = Worker::Create(std::move(opts), std::move(handler));
  EXPECT_TRUE(worker.ok()) << worker.status();
  if (!worker.ok()) return nullptr;
  absl::Status s = (*worker)->Start("127.0.0.1:0");
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_GT((*worker)->port(), 0);
  return std::move(*worker);
}

// Waits (up to 10 s) until `worker` serves at most `streams` streams; true
// once it does (a stream's OnDone has run).
inline bool WaitForOpenStreams(const Worker& worker, int streams) {
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (worker.open_streams() > streams) {
    if (absl::Now() > deadline) return false;
    absl::SleepFor(absl::Milliseconds(1));
  }
  return true;
}

inline WorkerOptions Options(int max_in_flight, std::string name = "test-worker") {
  WorkerOptions o;
  o.name = std::move(name);
  o.max_in_flight = max_in_flight;
  return o;
}

}  // namespace ferry::sdk::testing

#endif  // FERRY_CLIENTS_CPP_WORKER_TEST_SUPPORT_H_
