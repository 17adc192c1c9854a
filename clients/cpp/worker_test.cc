// Tests for the C++ worker SDK against a real gRPC client stream (what ferry does).
#include "clients/cpp/worker.h"

#include <atomic>
#include <map>
#include <memory>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <pthread.h>
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
#include "clients/cpp/thread_pool.h"
#include "clients/cpp/worker_test_support.h"

namespace ferry::sdk {
namespace {

using ferry::v1::Event;
using ferry::v1::ProcessRequest;
using ferry::v1::ProcessResponse;
using ferry::v1::Result;
using ::testing::UnorderedElementsAre;
using testing::Client;
using testing::Latch;
using testing::Options;
using testing::StartWorker;

TEST(WorkerTest, CreateRejectsBadOptions) {
  Handler ok = [](const Event&) { return Outcome::Ok(); };
  EXPECT_FALSE(Worker::Create(Options(0), ok).ok());
  WorkerOptions o = Options(4);
  o.handler_threads = 0;
  EXPECT_FALSE(Worker::Create(o, ok).ok());
  o = Options(4);
  o.max_results_batch = 0;
  EXPECT_FALSE(Worker::Create(o, ok).ok());
  EXPECT_FALSE(Worker::Create(Options(4), Handler()).ok());
}

TEST(WorkerTest, ReadyThenResultsAndCredit) {
  auto worker = StartWorker(Options(8, "w-1"), [](const Event&) { return Outcome::Ok(); });
  ASSERT_NE(worker, nullptr);
  Client client(worker->port());
  ferry::v1::Ready ready = client.ReadReady();
  EXPECT_EQ(ready.max_in_flight(), 8u);
  EXPECT_EQ(ready.worker_name(), "w-1");

  ASSERT_TRUE(client.SendEvents({1, 2, 3}));
  ASSERT_TRUE(client.ReadCredit(3));
  EXPECT_EQ(client.credit_total, 3);
  EXPECT_THAT(client.ResultIds(), UnorderedElementsAre(1u, 2u, 3u));
  for (const auto& [id, r] : client.results) EXPECT_EQ(r.status(), Result::OK) << id;
  EXPECT_EQ(worker->events_received(), 3);
  EXPECT_EQ(worker->credit_violations(), 0);
  EXPECT_GE(worker->max_held(), 1);
  EXPECT_LE(worker->max_held(), 3);
  worker->Shutdown(absl::Seconds(1));
}

TEST(WorkerTest, CreditRidesInResultsWhenFerryAsks) {
  auto worker = StartWorker(Options(8), [](const Event&) { return Outcome::Ok(); });
  ASSERT_NE(worker, nullptr);
  Client client(worker->port(), grpc::InsecureChannelCredentials(), /*results_credit=*/true);
  client.ReadReady();
  for (uint64_t id = 1; id <= 20; id += 4) {
    ASSERT_TRUE(client.SendEvents({id, id + 1, id + 2, id + 3}));
    ASSERT_TRUE(client.ReadCredit(4));
  }
  EXPECT_EQ(client.credit_total, 20);
  EXPECT_EQ(client.credit_messages, 0);  // all of it inside Results
  EXPECT_EQ(client.ResultIds().size(), 20u);
  worker->Shutdown(absl::Seconds(1));
}

TEST(WorkerTest, WithoutTheHeaderCreditIsItsOwnMessage) {
  auto worker = StartWorker(Options(8), [](const Event&) { return Outcome::Ok(); });
  ASSERT_NE(worker, nullptr);
  Client client(worker->port());
  client.ReadReady();
  ASSERT_TRUE(client.SendEvents({1, 2, 3, 4}));
  ASSERT_TRUE(client.ReadCredit(4));  // fails on credit inside Results
  EXPECT_GE(client.credit_messages, 1);
  worker->Shutdown(absl::Seconds(1));
}

TEST(WorkerTest, OutcomesMapToStatuses) {
  auto worker = StartWorker(Options(16), [](const Event& e) -> Outcome {
    if (e.payload() == "retry") return Outcome::Retry("later", absl::Milliseconds(1500));
    if (e.payload() == "retry-default") return Outcome::Retry("again");
    if (e.payload() == "retry-1us") return Outcome::Retry("soon", absl::Microseconds(1));
    if (e.payload() == "fail") return Outcome::Fail("bad record");
    if (e.payload() == "throw") throw std::runtime_error("boom");
    if (e.payload() == "throw-int") throw 7;
    return Outcome::Ok();
  });
  ASSERT_NE(worker, nullptr);
  Client client(worker->port());
  client.ReadReady();
  ASSERT_TRUE(client.SendEvents({1, 2, 3, 4, 5, 6, 7},
                                {"retry", "retry-default", "retry-1us", "fail", "throw",
                                 "throw-int", "ok"}));
  ASSERT_TRUE(client.ReadCredit(7));
  ASSERT_EQ(client.results.size(), 7u);
  auto& r = client.results;
  EXPECT_EQ(r[1].status(), Result::RETRY);
  EXPECT_EQ(r[1].message(), "later");
  EXPECT_EQ(r[1].retry_after_ms(), 1500u);
  EXPECT_EQ(r[2].status(), Result::RETRY);
  EXPECT_EQ(r[2].retry_after_ms(), 0u);
  EXPECT_EQ(r[3].status(), Result::RETRY);
  EXPECT_EQ(r[3].retry_after_ms(), 1u);
  EXPECT_EQ(r[4].status(), Result::FAIL);
  EXPECT_EQ(r[4].message(), "bad record");
  EXPECT_EQ(r[5].status(), Result::FAIL);
  EXPECT_EQ(r[5].message(), "boom");
  EXPECT_EQ(r[6].status(), Result::FAIL);
  EXPECT_FALSE(r[6].message().empty());
  EXPECT_EQ(r[7].status(), Result::OK);

  // Throwing handlers did not kill the stream.
  ASSERT_TRUE(client.SendEvents({8}));
  ASSERT_TRUE(client.ReadCredit(1));
  EXPECT_EQ(client.results[8].status(), Result::OK);
  worker->Shutdown(absl::Seconds(1));
}

TEST(WorkerTest, EventsOfOneMessageRunConcurrently) {
  absl::Mutex mu;
  int started = 0;
  WorkerOptions opts = Options(8);
  opts.handler_threads = 3;
  auto worker = StartWorker(opts, [&](const Event&) {
    absl::MutexLock l(&mu);
    ++started;
    // Deadlocks (test timeout) unless all three run at the same time.
    mu.Await(absl::Condition(+[](int* n) { return *n >= 3; }, &started));
    return Outcome::Ok();
  });
  ASSERT_NE(worker, nullptr);
  Client client(worker->port());
  client.ReadReady();
  ASSERT_TRUE(client.SendEvents({1, 2, 3}));
  ASSERT_TRUE(client.ReadCredit(3));
  EXPECT_EQ(client.results.size(), 3u);
  worker->Shutdown(absl::Seconds(1));
}

TEST(WorkerTest, AResultIsSentBeforeTheNextHandlerOnItsThreadEnds) {
  // One thread, one message: event 2 is slow (it waits until ferry has
  // event 1's result). A result held back until the thread's next handler
  // ends would hold a KEY lane up for as long as that handler takes.
  absl::Notification saw_first;
  WorkerOptions opts = Options(8);
  opts.handler_threads = 1;
  auto worker = StartWorker(opts, [&](const Event& e) {
    if (e.id() == 2) {
      EXPECT_TRUE(saw_first.WaitForNotificationWithTimeout(absl::Seconds(10)));
    }
    return Outcome::Ok();
  });
  ASSERT_NE(worker, nullptr);
  Client client(worker->port());
  client.ReadReady();
  ASSERT_TRUE(client.SendEvents({1, 2}));
  ASSERT_TRUE(client.ReadCredit(1));
  EXPECT_THAT(client.ResultIds(), UnorderedElementsAre(1u));
  saw_first.Notify();
  ASSERT_TRUE(client.ReadCredit(1));
  EXPECT_THAT(client.ResultIds(), UnorderedElementsAre(1u, 2u));
  worker->Shutdown(absl::Seconds(1));
}

TEST(WorkerTest, CancelSuppressesResultButReturnsCredit) {
  std::atomic<Worker*> self{nullptr};
  absl::Notification first_started, release_first;
  std::atomic<bool> first_saw_cancel{false};
  auto worker = StartWorker(Options(4), [&](const Event& e) {
    if (e.id() == 1) {
      first_started.Notify();
      release_first.WaitForNotification();
      first_saw_cancel = self.load()->IsCancelled(1);
    } else {
      // The stream handles messages in order, so Cancel{1} was applied already.
      release_first.Notify();
    }
    return Outcome::Ok();
  });
  ASSERT_NE(worker, nullptr);
  self = worker.get();
  Client client(worker->port());
  client.ReadReady();
  ASSERT_TRUE(client.SendEvents({1}));
  first_started.WaitForNotification();
  ASSERT_TRUE(client.SendCancel({1, 99}));  // 99 is unknown: ignored
  ASSERT_TRUE(client.SendEvents({2}));
  ASSERT_TRUE(client.ReadCredit(2));
  EXPECT_EQ(client.credit_total, 2);
  EXPECT_THAT(client.ResultIds(), UnorderedElementsAre(2u));
  EXPECT_TRUE(first_saw_cancel);
  EXPECT_FALSE(worker->IsCancelled(1));  // forgotten once finished
  worker->Shutdown(absl::Seconds(1));
}

TEST(WorkerTest, MaxHeldNeverExceedsCreditWhenClientRespectsIt) {
  constexpr int kCredit = 4;
  constexpr uint64_t kEvents = 300;
  WorkerOptions opts = Options(kCredit);
  opts.handler_threads = 3;
  opts.max_results_batch = 3;
  auto worker = StartWorker(opts, [](const Event& e) {
    return e.id() % 7 == 0 ? Outcome::Retry("r") : Outcome::Ok();
  });
  ASSERT_NE(worker, nullptr);
  Client client(worker->port());
  int64_t credit = client.ReadReady().max_in_flight();
  uint64_t next = 1;
  while (client.results.size() < kEvents) {
    std::vector<uint64_t> batch;
    while (credit > 0 && next <= kEvents) {
      batch.push_back(next++);
      --credit;
    }
    if (!batch.empty()) {
      ASSERT_TRUE(client.SendEvents(batch));
    }
    ProcessResponse msg;
    ASSERT_TRUE(client.stream().Read(&msg));
    if (msg.has_credit()) credit += msg.credit().n();
    if (msg.has_results()) {
      EXPECT_LE(msg.results().results_size(), 3);
      for (const Result& r : msg.results().results()) client.results[r.id()] = r;
    }
  }
  EXPECT_EQ(client.results.size(), kEvents);
  EXPECT_EQ(worker->events_received(), static_cast<int64_t>(kEvents));
  EXPECT_EQ(worker->credit_violations(), 0);
  EXPECT_GE(worker->max_held(), 1);
  EXPECT_LE(worker->max_held(), kCredit);
  worker->Shutdown(absl::Seconds(1));
}

TEST(WorkerTest, CreditViolationIsCountedAndStillProcessed) {
  Latch started;
  absl::Notification release;
  auto worker = StartWorker(Options(2), [&](const Event&) {
    started.Notify();
    release.WaitForNotification();
    return Outcome::Ok();
  });
  ASSERT_NE(worker, nullptr);
  Client client(worker->port());
  client.ReadReady();
  ASSERT_TRUE(client.SendEvents({1, 2, 3, 4, 5}));
  started.WaitForNotification();  // the whole message was accepted by now
  EXPECT_EQ(worker->credit_violations(), 3);
  EXPECT_EQ(worker->max_held(), 5);
  release.Notify();
  ASSERT_TRUE(client.ReadCredit(5));
  EXPECT_EQ(client.results.size(), 5u);
  worker->Shutdown(absl::Seconds(1));
}

// Where a sync handler runs: on the pool, or with inline_handlers on the
// stream thread that read the message. Either way every event is answered.
class WhereHandlersRunTest : public ::testing::TestWithParam<bool> {};

TEST_P(WhereHandlersRunTest, OnThePoolUnlessInline) {
  const bool inline_handlers = GetParam();
  std::atomic<int> on_pool{0};
  std::atomic<int> off_pool{0};
  WorkerOptions opts = Options(16);
  opts.inline_handlers = inline_handlers;
  auto worker = StartWorker(opts, [&](const Event&) {
    ++(ferry::sdk::internal::ThreadPool::OnPoolThread() ? on_pool : off_pool);
    return Outcome::Ok();
  });
  ASSERT_NE(worker, nullptr);
  Client client(worker->port(), grpc::InsecureChannelCredentials(), /*results_credit=*/true);
  client.ReadReady();
  ASSERT_TRUE(client.SendEvents({1, 2, 3}));
  ASSERT_TRUE(client.SendEvents({4, 5, 6}));
  ASSERT_TRUE(client.ReadCredit(6));
  EXPECT_THAT(client.ResultIds(), UnorderedElementsAre(1u, 2u, 3u, 4u, 5u, 6u));
  EXPECT_EQ(on_pool.load(), inline_handlers ? 0 : 6);
  EXPECT_EQ(off_pool.load(), inline_handlers ? 6 : 0);
  worker->Shutdown(absl::Seconds(1));
}

INSTANTIATE_TEST_SUITE_P(Inline, WhereHandlersRunTest, ::testing::Bool());

TEST(WorkerTest, EveryStreamIsServedByTheOneStreamThread) {
  // The SDK's point of owning its completion queue: every stream's reads
  // run on one thread of its own ("ferry-sdk-cq"), not on gRPC's callback
  // threads, so inline handlers of two streams all run there.
  absl::Mutex mu;
  std::set<std::string> threads;
  WorkerOptions opts = Options(16);
  opts.inline_handlers = true;
  auto worker = StartWorker(opts, [&](const Event&) {
    char name[16] = {};
    pthread_getname_np(pthread_self(), name, sizeof(name));
    absl::MutexLock l(&mu);
    threads.insert(name);
    return Outcome::Ok();
  });
  ASSERT_NE(worker, nullptr);
  Client first(worker->port(), grpc::InsecureChannelCredentials(), /*results_credit=*/true);
  Client second(worker->port(), grpc::InsecureChannelCredentials(), /*results_credit=*/true);
  first.ReadReady();
  second.ReadReady();
  for (uint64_t id = 1; id <= 20; id += 2) {
    ASSERT_TRUE(first.SendEvents({id}));
    ASSERT_TRUE(second.SendEvents({id + 1}));
  }
  ASSERT_TRUE(first.ReadCredit(10));
  ASSERT_TRUE(second.ReadCredit(10));
  {
    absl::MutexLock l(&mu);
    EXPECT_THAT(threads, ::testing::ElementsAre("ferry-sdk-cq"));
  }
  worker->Shutdown(absl::Seconds(1));
}

TEST(WorkerTest, InlineHandlersAnswerAMessageInOneResults) {
  // Inline handlers never block, so nothing is gained by sending a result
  // before the next handler of the message runs: one Results per message.
  WorkerOptions opts = Options(16);
  opts.inline_handlers = true;
  auto worker = StartWorker(opts, [](const Event&) { return Outcome::Ok(); });
  ASSERT_NE(worker, nullptr);
  Client client(worker->port(), grpc::InsecureChannelCredentials(), /*results_credit=*/true);
  client.ReadReady();
  ASSERT_TRUE(client.SendEvents({1, 2, 3, 4, 5}));
  ASSERT_TRUE(client.ReadCredit(5));
  EXPECT_THAT(client.ResultIds(), UnorderedElementsAre(1u, 2u, 3u, 4u, 5u));
  EXPECT_EQ(client.results_messages, 1);
  ASSERT_TRUE(client.SendEvents({6, 7}));
  ASSERT_TRUE(client.ReadCredit(2));
  EXPECT_EQ(client.results_messages, 2);
  // The worker's own counts (bench_worker reports them as events per message).
  EXPECT_EQ(worker->events_received(), 7);
  EXPECT_EQ(worker->events_messages(), 2);
  EXPECT_EQ(worker->results_messages(), 2);
  worker->Shutdown(absl::Seconds(1));
}

class AsyncHandlerTest : public ::testing::TestWithParam<bool> {};

TEST_P(AsyncHandlerTest, DoneFromAnyThreadOnceAndDroppedDoneFails) {
  absl::Mutex mu;
  std::vector<std::thread> threads;
  AsyncHandler handler = [&](const Event& e, std::function<void(Outcome)> done) {
    const uint64_t id = e.id();
    if (id == 2) return;  // drops `done`: reported as FAIL
    absl::MutexLock l(&mu);
    threads.emplace_back([id, done = std::move(done)] {
      if (id == 3) {
        done(Outcome::Retry("busy", absl::Seconds(2)));
        done(Outcome::Ok());  // second call ignored
      } else {
        done(Outcome::Ok());
      }
    });
  };
  WorkerOptions opts = Options(4);
  opts.inline_handlers = GetParam();
  auto worker = StartWorker(opts, handler);
  ASSERT_NE(worker, nullptr);
  Client client(worker->port());
  client.ReadReady();
  ASSERT_TRUE(client.SendEvents({1, 2, 3}));
  ASSERT_TRUE(client.ReadCredit(3));
  EXPECT_EQ(client.credit_total, 3);
  ASSERT_EQ(client.results.size(), 3u);
  EXPECT_EQ(client.results[1].status(), Result::OK);
  EXPECT_EQ(client.results[2].status(), Result::FAIL);
  EXPECT_THAT(client.results[2].message(), ::testing::HasSubstr("done"));
  EXPECT_EQ(client.results[3].status(), Result::RETRY);
  EXPECT_EQ(client.results[3].retry_after_ms(), 2000u);
  worker->Shutdown(absl::Seconds(1));
  absl::MutexLock l(&mu);
  for (std::thread& t : threads) t.join();
}

INSTANTIATE_TEST_SUITE_P(Inline, AsyncHandlerTest, ::testing::Bool());

TEST(WorkerTest, StreamClosedByFerryDropsResultsSafely) {
  Latch started;
  absl::Notification release;
  std::atomic<int> finished{0};
  auto worker = StartWorker(Options(4), [&](const Event& e) {
    if (e.id() < 10) {
      started.Notify();
      release.WaitForNotification();
    }
    ++finished;
    return Outcome::Ok();
  });
  ASSERT_NE(worker, nullptr);
  {
    Client client(worker->port());
    client.ReadReady();
    ASSERT_TRUE(client.SendEvents({1, 2}));
    started.WaitForNotification();
    ASSERT_TRUE(client.stream().WritesDone());
    // The worker ends the stream without waiting for the running handlers.
    ProcessResponse msg;
    EXPECT_FALSE(client.stream().Read(&msg));
    EXPECT_TRUE(client.stream().Finish().ok());
  }
  {
    // A cancelled stream with work in flight.
    Client client(worker->port());
    client.ReadReady();
    ASSERT_TRUE(client.SendEvents({3}));
    client.context().TryCancel();
    ProcessResponse msg;
    EXPECT_FALSE(client.stream().Read(&msg));
    EXPECT_FALSE(client.stream().Finish().ok());
  }
  // The worker keeps serving new streams.
  Client client(worker->port());
  client.ReadReady();
  ASSERT_TRUE(client.SendEvents({10}));
  ASSERT_TRUE(client.ReadCredit(1));
  EXPECT_THAT(client.ResultIds(), UnorderedElementsAre(10u));
  release.Notify();  // the orphaned handlers finish after their streams are gone
  worker->Shutdown(absl::Seconds(5));
  // The handler that had started finished (events of a gone stream that had
  // not started yet are skipped), and so did event 10.
  EXPECT_GE(finished.load(), 2);
}

// A message's second pool task may start only after the first task ran both
// units and the stream is gone: it must not touch a freed stream (UBSan and
// ASan in tools/sanitize see it if it does).
TEST(WorkerTest, ALatePoolTaskOutlivesNoStream) {
  Latch a_started, two_started;
  absl::Notification release_a, release_two;
  WorkerOptions opts = Options(8);
  opts.handler_threads = 2;
  auto worker = StartWorker(opts, [&](const Event& e) {
    if (e.id() == 100) {  // holds one of the two pool threads
      a_started.Notify();
      release_a.WaitForNotification();
    } else if (e.id() == 2) {
      two_started.Notify();
      release_two.WaitForNotification();
    }
    return Outcome::Ok();
  });
  ASSERT_NE(worker, nullptr);
  Client a(worker->port());
  a.ReadReady();
  ASSERT_TRUE(a.SendEvents({100}));
  a_started.WaitForNotification();
  {
    // Two independent events: two units, two tasks. The free thread takes
    // the first task, which runs both units; the second task waits.
    Client b(worker->port());
    b.ReadReady();
    ASSERT_TRUE(b.SendEvents({1, 2}));
    two_started.WaitForNotification();
    b.context().TryCancel();
    ASSERT_TRUE(testing::WaitForOpenStreams(*worker, 1)) << "stream b did not end";
    // Event 2's result is dropped and its reference with it; then the first
    // task returns and the second one starts on the same thread.
    release_two.Notify();
  }
  release_a.Notify();
  ASSERT_TRUE(a.ReadCredit(1));
  EXPECT_THAT(a.ResultIds(), UnorderedElementsAre(100u));
  worker->Shutdown(absl::Seconds(5));
}

TEST(WorkerTest, ShutdownDeliversInFlightResultWithinGrace) {
  std::atomic<Worker*> self{nullptr};
  absl::Notification started;
  auto worker = StartWorker(Options(4), [&](const Event&) {
    started.Notify();
    // Still working when Shutdown begins.
    while (!self.load()->shutting_down()) std::this_thread::yield();
    absl::SleepFor(absl::Milliseconds(100));  // simulated work, not synchronisation
    return Outcome::Ok();
  });
  ASSERT_NE(worker, nullptr);
  self = worker.get();
  Client client(worker->port());
  client.ReadReady();
  ASSERT_TRUE(client.SendEvents({7}));
  started.WaitForNotification();

  const absl::Duration grace = absl::Seconds(5);
  absl::Duration took;
  std::thread stopper([&] {
    absl::Time t0 = absl::Now();
    worker->Shutdown(grace);
    took = absl::Now() - t0;
  });
  ProcessResponse msg;
  ASSERT_TRUE(client.stream().Read(&msg));
  ASSERT_TRUE(msg.has_results()) << msg.ShortDebugString();
  ASSERT_EQ(msg.results().results_size(), 1);
  EXPECT_EQ(msg.results().results(0).id(), 7u);
  EXPECT_EQ(msg.results().results(0).status(), Result::OK);
  // Draining: no more credit; the stream ends.
  EXPECT_FALSE(client.stream().Read(&msg)) << msg.ShortDebugString();
  grpc::Status st = client.stream().Finish();
  EXPECT_EQ(st.error_code(), grpc::StatusCode::UNAVAILABLE);
  stopper.join();
  EXPECT_LT(took, grace);
  worker->Wait();             // returns: shut down
  worker->Shutdown(grace);    // idempotent

  // New streams are refused.
  Client late(worker->port());
  EXPECT_FALSE(late.stream().Read(&msg));
  EXPECT_FALSE(late.stream().Finish().ok());
}

TEST(WorkerTest, ShutdownWithoutStart) {
  auto worker = Worker::Create(Options(1), [](const Event&) { return Outcome::Ok(); });
  ASSERT_TRUE(worker.ok());
  (*worker)->Shutdown(absl::ZeroDuration());
  (*worker)->Wait();
  EXPECT_FALSE((*worker)->Start("127.0.0.1:0").ok());
}

TEST(WorkerTest, StartAgainAfterAFailedStartServes) {
  // A taken port fails Start with an error; the caller may then try
  // another address with the same Worker.
  auto holder = StartWorker(Options(1), [](const Event&) { return Outcome::Ok(); });
  ASSERT_NE(holder, nullptr);
  auto worker = Worker::Create(Options(4), [](const Event&) { return Outcome::Ok(); });
  ASSERT_TRUE(worker.ok());
  EXPECT_FALSE((*worker)->Start("127.0.0.1:" + std::to_string(holder->port())).ok());
  ASSERT_TRUE((*worker)->Start("127.0.0.1:0").ok());
  Client client((*worker)->port(), grpc::InsecureChannelCredentials(), /*results_credit=*/true);
  client.ReadReady();
  ASSERT_TRUE(client.SendEvents({1, 2}));
  ASSERT_TRUE(client.ReadCredit(2));
  EXPECT_THAT(client.ResultIds(), UnorderedElementsAre(1u, 2u));
  (*worker)->Shutdown(absl::Seconds(1));
  holder->Shutdown(absl::Seconds(1));
}

}  // namespace
}  // namespace ferry::sdk
