// Runs in the C++ worker SDK ("Runs" in proto/ferry/v1/processor.proto)
// against a real gRPC client stream: order, one member at a time,
// NOT_ATTEMPTED after a member that did not end OK, cancel, async, shutdown.
#include <algorithm>
#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "clients/cpp/worker.h"
#include "clients/cpp/worker_test_support.h"
#include "ferry/v1/processor.grpc.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ferry::sdk {
namespace {

using ferry::v1::Event;
using ferry::v1::ProcessRequest;
using ferry::v1::ProcessResponse;
using ferry::v1::Result;
using ::testing::ElementsAre;
using ::testing::UnorderedElementsAre;
using testing::Client;
using testing::Latch;
using testing::Options;
using testing::StartWorker;

struct Ev {
  uint64_t id;
  uint64_t run_id;
  std::string payload = "ok";
};

bool Send(Client& client, const std::vector<Ev>& events) {
  ProcessRequest req;
  for (const Ev& ev : events) {
    Event* e = req.mutable_events()->add_events();
    e->set_id(ev.id);
    e->set_run_id(ev.run_id);
    e->set_payload(ev.payload);
    e->set_attempt(1);
  }
  return client.stream().Write(req);
}

// What handlers saw: the order they started in and how many members of one
// run were running at once.
class Journal {
 public:
  // Call at handler start / end.
  void Start(const Event& e) {
    absl::MutexLock l(&mu_);
    started_[e.run_id()].push_back(e.id());
    all_.push_back(e.id());
    if (e.run_id() != 0 && ++running_[e.run_id()] > 1) overlap_ = true;
  }
  void End(const Event& e) {
    absl::MutexLock l(&mu_);
    if (e.run_id() != 0) --running_[e.run_id()];
  }
  std::vector<uint64_t> started(uint64_t run) {
    absl::MutexLock l(&mu_);
    return started_[run];
  }
  std::vector<uint64_t> all() {
    absl::MutexLock l(&mu_);
    return all_;
  }
  bool overlap() {
    absl::MutexLock l(&mu_);
    return overlap_;
  }

 private:
  absl::Mutex mu_;
  std::map<uint64_t, std::vector<uint64_t>> started_ ABSL_GUARDED_BY(mu_);
  std::map<uint64_t, int> running_ ABSL_GUARDED_BY(mu_);
  std::vector<uint64_t> all_ ABSL_GUARDED_BY(mu_);
  bool overlap_ ABSL_GUARDED_BY(mu_) = false;
};

Outcome ByPayload(const Event& e) {
  if (e.payload() == "retry") return Outcome::Retry("later");
  if (e.payload() == "fail") return Outcome::Fail("bad");
  if (e.payload() == "throw") throw std::runtime_error("boom");
  return Outcome::Ok();
}

TEST(WorkerRunsTest, ReadyAnnouncesMaxRun) {
  Handler ok = [](const Event&) { return Outcome::Ok(); };
  {
    auto worker = StartWorker(Options(8), ok);
    ASSERT_NE(worker, nullptr);
    Client client(worker->port());
    EXPECT_EQ(client.ReadReady().max_run(), 64u);  // the default
    worker->Shutdown(absl::Seconds(1));
  }
  WorkerOptions o = Options(8);
  o.max_run = 0;
  auto worker = StartWorker(o, ok);
  ASSERT_NE(worker, nullptr);
  Client client(worker->port());
  EXPECT_EQ(client.ReadReady().max_run(), 0u);
  worker->Shutdown(absl::Seconds(1));
  o.max_run = -1;
  EXPECT_FALSE(Worker::Create(o, ok).ok());
}

TEST(WorkerRunsTest, MembersRunInMessageOrderOneAtATime) {
  Journal journal;
  Latch later_member_started;
  WorkerOptions opts = Options(32);
  opts.handler_threads = 4;
  auto worker = StartWorker(opts, [&](const Event& e) {
    journal.Start(e);
    if (e.id() == 1) {
      // With four threads, a later member of run 7 would start now unless
      // the SDK holds it back; waiting bounds the check, it is no sync.
      EXPECT_FALSE(later_member_started.WaitFor(absl::Milliseconds(100)));
    } else if (e.run_id() == 7) {
      later_member_started.Notify();
    }
    journal.End(e);
    return Outcome::Ok();
  });
  ASSERT_NE(worker, nullptr);
  Client client(worker->port());
  client.ReadReady();
  // Two interleaved runs and independent events in one message.
  ASSERT_TRUE(Send(client, {{1, 7}, {2, 8}, {3, 0}, {4, 7}, {5, 8}, {6, 7}, {9, 0}, {10, 7}}));
  ASSERT_TRUE(client.ReadCredit(8));
  EXPECT_EQ(client.results.size(), 8u);
  for (const auto& [id, r] : client.results) EXPECT_EQ(r.status(), Result::OK) << id;
  EXPECT_THAT(journal.started(7), ElementsAre(1u, 4u, 6u, 10u));
  EXPECT_THAT(journal.started(8), ElementsAre(2u, 5u));
  EXPECT_FALSE(journal.overlap());
  worker->Shutdown(absl::Seconds(1));
}

// (how the run ends, inline_handlers)
class EndsRunTest : public ::testing::TestWithParam<std::tuple<std::string, bool>> {};

TEST_P(EndsRunTest, LaterMembersAreNotAttempted) {
  Journal journal;
  WorkerOptions opts = Options(32);
  opts.handler_threads = 3;
  opts.inline_handlers = std::get<1>(GetParam());
  auto worker = StartWorker(opts, [&](const Event& e) {
    journal.Start(e);
    journal.End(e);
    return ByPayload(e);
  });
  ASSERT_NE(worker, nullptr);
  Client client(worker->port());
  client.ReadReady();
  const std::string how = std::get<0>(GetParam());
  // Run 5: 1, 2, 3 (ends badly), 4, 6; the independent 7 fails alone and
  // ends nothing; run 8 is unaffected.
  ASSERT_TRUE(Send(client, {{1, 5}, {2, 5}, {3, 5, how}, {4, 5}, {7, 0, how}, {6, 5}, {10, 8},
                            {11, 8}}));
  ASSERT_TRUE(client.ReadCredit(8));
  ASSERT_EQ(client.results.size(), 8u);
  auto& r = client.results;
  EXPECT_EQ(r[1].status(), Result::OK);
  EXPECT_EQ(r[2].status(), Result::OK);
  const Result::Status bad = how == "retry" ? Result::RETRY : Result::FAIL;
  EXPECT_EQ(r[3].status(), bad);
  EXPECT_EQ(r[4].status(), Result::NOT_ATTEMPTED);
  EXPECT_EQ(r[6].status(), Result::NOT_ATTEMPTED);
  EXPECT_EQ(r[7].status(), bad);
  EXPECT_EQ(r[10].status(), Result::OK);
  EXPECT_EQ(r[11].status(), Result::OK);
  EXPECT_THAT(journal.started(5), ElementsAre(1u, 2u, 3u));  // never 4 or 6
  EXPECT_EQ(client.credit_total, 8);
  // The stream goes on: the same run id in a new message is a new run.
  ASSERT_TRUE(Send(client, {{20, 5}, {21, 5}}));
  ASSERT_TRUE(client.ReadCredit(2));
  EXPECT_EQ(r[20].status(), Result::OK);
  EXPECT_EQ(r[21].status(), Result::OK);
  worker->Shutdown(absl::Seconds(1));
}

INSTANTIATE_TEST_SUITE_P(Outcomes, EndsRunTest,
                         ::testing::Combine(::testing::Values("retry", "fail", "throw"),
                                            ::testing::Bool()));

TEST(WorkerRunsTest, WithRunsOffRunIdsAreStillHonoured) {
  // A ferry should not send runs to a worker that did not ask; if one does,
  // handling them in order is the safe answer.
  WorkerOptions opts = Options(8);
  opts.max_run = 0;
  opts.handler_threads = 3;
  auto worker = StartWorker(opts, ByPayload);
  ASSERT_NE(worker, nullptr);
  Client client(worker->port());
  client.ReadReady();
  ASSERT_TRUE(Send(client, {{1, 3, "fail"}, {2, 3}}));
  ASSERT_TRUE(client.ReadCredit(2));
  EXPECT_EQ(client.results[1].status(), Result::FAIL);
  EXPECT_EQ(client.results[2].status(), Result::NOT_ATTEMPTED);
  worker->Shutdown(absl::Seconds(1));
}

// Run 4 = 1, 2, 3, 5 and independent event 9 that releases member 1 once
// the message before it (a Cancel) was applied.
struct CancelCase {
  std::vector<uint64_t> cancel;
  uint64_t block;  // the member that waits for the release
  std::vector<uint64_t> started;  // the members whose handler ran
};

class CancelRunTest : public ::testing::TestWithParam<CancelCase> {};

TEST_P(CancelRunTest, CancelEndsTheRun) {
  const CancelCase c = GetParam();
  Journal journal;
  absl::Notification blocked, release;
  WorkerOptions opts = Options(16);
  opts.handler_threads = 2;
  auto worker = StartWorker(opts, [&](const Event& e) {
    journal.Start(e);
    if (e.id() == c.block) {
      blocked.Notify();
      release.WaitForNotification();
    } else if (e.id() == 9) {
      release.Notify();  // the stream applies messages in order: the Cancel is in
    }
    journal.End(e);
    return Outcome::Ok();
  });
  ASSERT_NE(worker, nullptr);
  Client client(worker->port());
  client.ReadReady();
  ASSERT_TRUE(Send(client, {{1, 4}, {2, 4}, {3, 4}, {5, 4}}));
  blocked.WaitForNotification();
  ASSERT_TRUE(client.SendCancel(c.cancel));
  ASSERT_TRUE(Send(client, {{9, 0}}));
  ASSERT_TRUE(client.ReadCredit(5));  // credit for every event, results only for some
  EXPECT_EQ(client.credit_total, 5);
  std::set<uint64_t> cancelled(c.cancel.begin(), c.cancel.end());
  bool ended = false;
  for (uint64_t id : {1u, 2u, 3u, 5u}) {
    SCOPED_TRACE(id);
    if (cancelled.count(id)) {
      EXPECT_EQ(client.results.count(id), 0u);  // ferry dropped it: no result
      ended = true;
    } else if (ended) {
      ASSERT_EQ(client.results.count(id), 1u);
      EXPECT_EQ(client.results[id].status(), Result::NOT_ATTEMPTED);
    } else {
      ASSERT_EQ(client.results.count(id), 1u);
      EXPECT_EQ(client.results[id].status(), Result::OK);
    }
  }
  EXPECT_EQ(journal.started(4), c.started);
  worker->Shutdown(absl::Seconds(1));
}

INSTANTIATE_TEST_SUITE_P(
    Cases, CancelRunTest,
    ::testing::Values(CancelCase{{2, 3, 5}, 1, {1}},  // ferry's timeout: a member and all later
                      CancelCase{{3}, 1, {1, 2}},     // a middle member not started yet
                      CancelCase{{2}, 2, {1, 2}}));   // the running member: it ends the run

TEST(WorkerRunsTest, AsyncMembersContinueFromDone) {
  Journal journal;
  absl::Mutex mu;
  std::vector<std::thread> threads;
  AsyncHandler handler = [&](const Event& e, std::function<void(Outcome)> done) {
    journal.Start(e);
    journal.End(e);
    const uint64_t id = e.id();
    if (id % 2 == 0) {  // done inline
      done(id == 6 ? Outcome::Retry("busy") : Outcome::Ok());
      return;
    }
    if (id == 13) return;  // drops done: FAIL, and the run ends
    absl::MutexLock l(&mu);
    threads.emplace_back([done = std::move(done)] { done(Outcome::Ok()); });
  };
  WorkerOptions opts = Options(32);
  opts.handler_threads = 2;
  auto worker = StartWorker(opts, handler);
  ASSERT_NE(worker, nullptr);
  Client client(worker->port());
  client.ReadReady();
  ASSERT_TRUE(Send(client, {{1, 1}, {2, 1}, {3, 1}, {4, 1}, {5, 1}, {6, 1}, {7, 1}, {11, 2},
                            {13, 2}, {15, 2}}));
  ASSERT_TRUE(client.ReadCredit(10));
  auto& r = client.results;
  for (uint64_t id : {1u, 2u, 3u, 4u, 5u, 11u}) EXPECT_EQ(r[id].status(), Result::OK) << id;
  EXPECT_EQ(r[6].status(), Result::RETRY);
  EXPECT_EQ(r[7].status(), Result::NOT_ATTEMPTED);
  EXPECT_EQ(r[13].status(), Result::FAIL);
  EXPECT_EQ(r[15].status(), Result::NOT_ATTEMPTED);
  EXPECT_THAT(journal.started(1), ElementsAre(1u, 2u, 3u, 4u, 5u, 6u));
  EXPECT_THAT(journal.started(2), ElementsAre(11u, 13u));
  worker->Shutdown(absl::Seconds(1));
  absl::MutexLock l(&mu);
  for (std::thread& t : threads) t.join();
}

// A run continued on the pool by an async member's `done` whose next (and
// last) member drops its `done` after the stream is gone: that member's FAIL
// hands over the stream's last reference inside the task, and the task must
// not touch the freed stream afterwards (UBSan and ASan in tools/sanitize
// see it if it does).
TEST(WorkerRunsTest, AContinuedRunOutlivesNoStream) {
  absl::Mutex mu;
  std::function<void(Outcome)> done_11;
  Latch stashed_11, started_13;
  absl::Notification release_13;
  AsyncHandler handler = [&](const Event& e, std::function<void(Outcome)> done) {
    if (e.id() == 11) {
      absl::MutexLock l(&mu);
      done_11 = std::move(done);
      stashed_11.Notify();
      return;
    }
    started_13.Notify();
    release_13.WaitForNotification();  // then drops `done` without calling it
  };
  WorkerOptions opts = Options(8);
  opts.handler_threads = 2;
  auto worker = StartWorker(opts, handler);
  ASSERT_NE(worker, nullptr);
  {
    Client client(worker->port());
    client.ReadReady();
    ASSERT_TRUE(Send(client, {{11, 2}, {13, 2}}));
    stashed_11.WaitForNotification();
    {
      absl::MutexLock l(&mu);
      done_11(Outcome::Ok());  // the run goes on in a pool task: member 13
      done_11 = nullptr;
    }
    started_13.WaitForNotification();
    client.context().TryCancel();
    ASSERT_TRUE(testing::WaitForOpenStreams(*worker, 0)) << "the stream did not end";
  }
  release_13.Notify();
  worker->Shutdown(absl::Seconds(5));  // joins the pool: the task has returned
}

TEST(WorkerRunsTest, ShutdownEndsARunAfterTheRunningMember) {
  std::atomic<Worker*> self{nullptr};
  Journal journal;
  absl::Notification started;
  auto worker = StartWorker(Options(8), [&](const Event& e) {
    journal.Start(e);
    if (e.id() == 1) {
      started.Notify();
      while (!self.load()->shutting_down()) std::this_thread::yield();
    }
    journal.End(e);
    return Outcome::Ok();
  });
  ASSERT_NE(worker, nullptr);
  self = worker.get();
  Client client(worker->port());
  client.ReadReady();
  ASSERT_TRUE(Send(client, {{1, 2}, {2, 2}, {3, 2}}));
  started.WaitForNotification();
  std::thread stopper([&] { worker->Shutdown(absl::Seconds(5)); });
  std::map<uint64_t, Result> results;
  ProcessResponse msg;
  while (client.stream().Read(&msg)) {
    ASSERT_TRUE(msg.has_results()) << msg.ShortDebugString();  // draining: no credit
    for (const Result& r : msg.results().results()) results[r.id()] = r;
  }
  EXPECT_EQ(client.stream().Finish().error_code(), grpc::StatusCode::UNAVAILABLE);
  stopper.join();
  ASSERT_EQ(results.size(), 3u);
  EXPECT_EQ(results[1].status(), Result::OK);
  EXPECT_EQ(results[2].status(), Result::NOT_ATTEMPTED);
  EXPECT_EQ(results[3].status(), Result::NOT_ATTEMPTED);
  EXPECT_THAT(journal.started(2), ElementsAre(1u));
}

TEST(WorkerRunsTest, ManyRunsUnderLoadKeepOrder) {
  // Many messages of interleaved runs through a small credit window: every
  // run's members start in order and never overlap.
  constexpr int kMessages = 200;
  Journal journal;
  WorkerOptions opts = Options(64);
  opts.handler_threads = 4;
  opts.max_results_batch = 5;
  auto worker = StartWorker(opts, [&](const Event& e) {
    journal.Start(e);
    journal.End(e);
    return Outcome::Ok();
  });
  ASSERT_NE(worker, nullptr);
  Client client(worker->port(), grpc::InsecureChannelCredentials(), /*results_credit=*/true);
  client.ReadReady();
  uint64_t id = 1;
  for (int m = 0; m < kMessages; ++m) {
    std::vector<Ev> events;
    for (int i = 0; i < 16; ++i) events.push_back({id++, static_cast<uint64_t>(m * 4 + i % 4 + 1)});
    ASSERT_TRUE(Send(client, events));
    ASSERT_TRUE(client.ReadCredit(16));
  }
  EXPECT_EQ(client.results.size(), static_cast<size_t>(kMessages * 16));
  EXPECT_FALSE(journal.overlap());
  for (uint64_t run = 1; run <= kMessages * 4; ++run) {
    std::vector<uint64_t> s = journal.started(run);
    ASSERT_EQ(s.size(), 4u) << run;
    EXPECT_TRUE(std::is_sorted(s.begin(), s.end())) << run;
  }
  worker->Shutdown(absl::Seconds(1));
}

}  // namespace
}  // namespace ferry::sdk
