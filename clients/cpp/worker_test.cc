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

namespace ferry::sdk {
namespace {

using ferry::v1::Event;
using ferry::v1::ProcessRequest;
using ferry::v1::ProcessResponse;
using ferry::v1::Result;
using ::testing::UnorderedElementsAre;

// A notification that many threads may fire.
class Latch {
 public:
  void Notify() {
    if (!fired_.exchange(true)) n_.Notify();
  }
  void WaitForNotification() { n_.WaitForNotification(); }

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

WorkerOptions Options(int max_in_flight, std::string name = "test-worker") {
  WorkerOptions o;
  o.name = std::move(name);
  o.max_in_flight = max_in_flight;
  return o;
}

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

TEST(WorkerTest, AsyncHandler) {
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
  auto worker = StartWorker(Options(4), handler);
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

TEST(WorkerTest, CreateRejectsIncompleteTls) {
  Handler ok = [](const Event&) { return Outcome::Ok(); };
  WorkerOptions o = Options(4);
  o.tls.cert_file = "/x/tls.crt";
  EXPECT_EQ(Worker::Create(o, ok).status().code(), absl::StatusCode::kInvalidArgument);
  o = Options(4);
  o.tls.client_ca_file = "/x/ca.crt";
  EXPECT_EQ(Worker::Create(o, ok).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(WorkerTest, StartNamesAnUnreadableTlsFile) {
  WorkerOptions o = Options(4);
  o.tls.cert_file = "/nonexistent/tls.crt";
  o.tls.key_file = "/nonexistent/tls.key";
  auto worker = Worker::Create(o, [](const Event&) { return Outcome::Ok(); });
  ASSERT_TRUE(worker.ok()) << worker.status();
  absl::Status s = (*worker)->Start("127.0.0.1:0");
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(s.message(), "tls.cert_file: cannot read /nonexistent/tls.crt: No such file or directory");
}

// PEM files of a throwaway CA, a server certificate for 127.0.0.1 and a
// client certificate, made with the openssl CLI in TEST_TMPDIR.
struct TestPki {
  std::string ca_crt, server_crt, server_key, client_crt, client_key;
};

void WriteTextFile(const std::string& path, const std::string& contents) {
  std::FILE* f = std::fopen(path.c_str(), "w");
  ASSERT_NE(f, nullptr) << path;
  std::fwrite(contents.data(), 1, contents.size(), f);
  std::fclose(f);
}

void MakeTestPki(TestPki* pki) {
  ASSERT_EQ(std::system("command -v openssl >/dev/null 2>&1"), 0)
      << "the openssl CLI is missing: install Debian's `openssl` package";
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string dir = std::string(tmp != nullptr ? tmp : "/tmp") + "/sdk-pki";
  ASSERT_TRUE(mkdir(dir.c_str(), 0700) == 0 || errno == EEXIST) << dir;
  WriteTextFile(dir + "/ca.cnf",
                "[req]\nprompt = no\ndistinguished_name = dn\nx509_extensions = ext\n"
                "[dn]\nCN = sdk test CA\n"
                "[ext]\nbasicConstraints = critical,CA:TRUE\nkeyUsage = critical,keyCertSign\n");
  WriteTextFile(dir + "/leaf.cnf", "[req]\nprompt = no\ndistinguished_name = dn\n[dn]\nCN = leaf\n");
  WriteTextFile(dir + "/server.ext", "extendedKeyUsage = serverAuth\nsubjectAltName = IP:127.0.0.1\n");
  WriteTextFile(dir + "/client.ext", "extendedKeyUsage = clientAuth\n");
  const std::string key = " -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
  for (const std::string& command : {
           "openssl req -x509 -days 2 -config ca.cnf -keyout ca.key -out ca.crt" + key,
           "openssl req -new -config leaf.cnf -keyout server.key -out server.csr" + key,
           std::string("openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -set_serial 2"
                       " -days 2 -extfile server.ext -out server.crt"),
           "openssl req -new -config leaf.cnf -keyout client.key -out client.csr" + key,
           std::string("openssl x509 -req -in client.csr -CA ca.crt -CAkey ca.key -set_serial 3"
                       " -days 2 -extfile client.ext -out client.crt"),
       }) {
    const std::string line = "cd '" + dir + "' && " + command + " >>openssl.log 2>&1";
    ASSERT_EQ(std::system(line.c_str()), 0) << line << " (see " << dir << "/openssl.log)";
  }
  *pki = TestPki{dir + "/ca.crt", dir + "/server.crt", dir + "/server.key", dir + "/client.crt",
                 dir + "/client.key"};
}

std::string ReadTextFile(const std::string& path) {
  std::string contents;
  std::FILE* f = std::fopen(path.c_str(), "r");
  if (f == nullptr) return contents;
  char buffer[4096];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof(buffer), f)) > 0) contents.append(buffer, n);
  std::fclose(f);
  return contents;
}

TEST(WorkerTest, ServesTlsAndRequiresClientCertificatesWithClientCa) {
  TestPki pki;
  ASSERT_NO_FATAL_FAILURE(MakeTestPki(&pki));
  WorkerOptions o = Options(4, "tls-worker");
  o.tls.cert_file = pki.server_crt;
  o.tls.key_file = pki.server_key;
  auto tls_worker = StartWorker(o, [](const Event&) { return Outcome::Ok(); });
  o.tls.client_ca_file = pki.ca_crt;
  auto mtls_worker = StartWorker(o, [](const Event&) { return Outcome::Ok(); });
  ASSERT_NE(tls_worker, nullptr);
  ASSERT_NE(mtls_worker, nullptr);

  grpc::SslCredentialsOptions server_only;
  server_only.pem_root_certs = ReadTextFile(pki.ca_crt);
  grpc::SslCredentialsOptions with_client_cert = server_only;
  with_client_cert.pem_cert_chain = ReadTextFile(pki.client_crt);
  with_client_cert.pem_private_key = ReadTextFile(pki.client_key);

  // TLS: the CA is enough; events flow.
  {
    Client client(tls_worker->port(), grpc::SslCredentials(server_only));
    EXPECT_EQ(client.ReadReady().worker_name(), "tls-worker");
    ASSERT_TRUE(client.SendEvents({1}));
    ASSERT_TRUE(client.ReadCredit(1));
    EXPECT_THAT(client.ResultIds(), UnorderedElementsAre(1u));
  }
  // Plaintext to a TLS port: no stream.
  {
    Client client(tls_worker->port());
    ProcessResponse msg;
    EXPECT_FALSE(client.stream().Read(&msg));
    EXPECT_EQ(client.stream().Finish().error_code(), grpc::StatusCode::UNAVAILABLE);
  }
  // mTLS: a client certificate from the CA is required.
  {
    Client client(mtls_worker->port(), grpc::SslCredentials(with_client_cert));
    EXPECT_EQ(client.ReadReady().worker_name(), "tls-worker");
  }
  {
    Client client(mtls_worker->port(), grpc::SslCredentials(server_only));
    ProcessResponse msg;
    EXPECT_FALSE(client.stream().Read(&msg));
    EXPECT_EQ(client.stream().Finish().error_code(), grpc::StatusCode::UNAVAILABLE);
  }
  EXPECT_EQ(mtls_worker->events_received(), 0);
  tls_worker->Shutdown(absl::Seconds(1));
  mtls_worker->Shutdown(absl::Seconds(1));
}

}  // namespace
}  // namespace ferry::sdk
