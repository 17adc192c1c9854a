#include "clients/cpp/stream.h"

#include <algorithm>
#include <cstddef>
#include <exception>
#include <limits>
#include <memory>
#include <utility>
#include <vector>

namespace ferry::sdk::internal {

using ferry::v1::ProcessRequest;
using ferry::v1::ProcessResponse;

namespace {

void ToResult(const Completed& c, ferry::v1::Result* r) {
  r->set_id(c.id);
  if (c.not_attempted) {
    r->set_status(ferry::v1::Result::NOT_ATTEMPTED);
    return;
  }
  const Outcome& outcome = c.outcome;
  switch (outcome.kind()) {
    case Outcome::Kind::kOk:
      r->set_status(ferry::v1::Result::OK);
      break;
    case Outcome::Kind::kRetry: {
      r->set_status(ferry::v1::Result::RETRY);
      absl::Duration after = outcome.retry_after();
      if (after > absl::ZeroDuration()) {
        int64_t ms = absl::ToInt64Milliseconds(absl::Ceil(after, absl::Milliseconds(1)));
        r->set_retry_after_ms(static_cast<uint32_t>(
            std::min<int64_t>(ms, std::numeric_limits<uint32_t>::max())));
      }
      break;
    }
    case Outcome::Kind::kFail:
      r->set_status(ferry::v1::Result::FAIL);
      break;
  }
  if (!outcome.message().empty()) r->set_message(outcome.message());
}

}  // namespace

void Stream::Accept(std::shared_ptr<Worker::Core> core,
                    ferry::v1::Processor::AsyncService* service,
                    grpc::ServerCompletionQueue* cq) {
  auto* stream = new Stream(std::move(core), service, cq);
  {
    absl::MutexLock l(&stream->mu_);
    absl::MutexLock cl(&stream->core_->mu);
    // Under Core::mu: Worker::Service clears `accepting` under it before it
    // shuts the queue down, and no request may follow that.
    if (stream->core_->accepting) {
      // Before the request, as gRPC requires. Its tag comes back only if
      // the call starts (OnAccepted with ok).
      stream->call_->context.AsyncNotifyWhenDone(&stream->call_done_op_);
      service->RequestProcess(&stream->call_->context, &stream->call_->io, cq, cq,
                              &stream->accepted_op_);
      return;
    }
  }
  delete stream;
}

Stream::Stream(std::shared_ptr<Worker::Core> core, ferry::v1::Processor::AsyncService* service,
               grpc::ServerCompletionQueue* cq)
    : core_(std::move(core)), service_(service), cq_(cq) {}

void Stream::Unref() {
  if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
}

void Stream::OnAccepted(bool ok) {
  // The next call gets its request first: a queue always has one waiting.
  if (ok) Accept(core_, service_, cq_);
  bool release = false;
  {
    absl::MutexLock l(&mu_);
    accept_pending_ = false;
    if (ok) {
      call_done_pending_ = true;
      BeginLocked();
    } else {
      // The server is shutting down; the call never started.
      call_over_ = true;
      finished_ = true;
      release = ReleaseLocked();
    }
  }
  if (release) Unref();
}

void Stream::BeginLocked() {
  // A ferry that sends this header takes credit inside Results (one
  // message per batch instead of Results + Credit); an older one does not.
  const auto& metadata = call_->context.client_metadata();
  auto header = metadata.find("ferry-results-credit");
  results_carry_credit_ = header != metadata.end() && header->second == "1";
  bool reject;
  {
    absl::MutexLock cl(&core_->mu);
    reject = core_->draining;
    if (!reject) core_->streams.insert(this);
  }
  registered_ = !reject;
  if (reject) {
    finished_ = true;
    may_skip_.store(true, std::memory_order_release);
    StartFinishLocked(grpc::Status(grpc::StatusCode::UNAVAILABLE, "worker shutting down"));
    return;
  }
  ProcessResponse ready;
  ready.mutable_ready()->set_max_in_flight(static_cast<uint32_t>(core_->options.max_in_flight));
  ready.mutable_ready()->set_worker_name(core_->options.name);
  ready.mutable_ready()->set_max_run(static_cast<uint32_t>(core_->options.max_run));
  queue_.push_back(std::move(ready));
  granted_ = core_->options.max_in_flight;
  reading_ = slots_->Get();
  StartReadLocked();
  PumpLocked();
}

void Stream::StartReadLocked() {
  read_pending_ = true;
  call_->io.Read(reading_->request(), &read_op_);
}

void Stream::StartFinishLocked(const grpc::Status& status) {
  finish_pending_ = true;
  call_->io.Finish(status, &finish_op_);
}

bool Stream::ReleaseLocked() {
  if (call_ == nullptr || !call_over_ || accept_pending_ || read_pending_ || write_in_flight_ ||
      finish_pending_ || call_done_pending_) {
    return false;
  }
  call_.reset();
  if (registered_) {
    registered_ = false;
    absl::MutexLock cl(&core_->mu);
    core_->streams.erase(this);
  }
  return true;
}

void Stream::OnReadDone(bool ok) {
  std::shared_ptr<MessageWork> work;
  bool release = false;
  {
    absl::MutexLock l(&mu_);
    read_pending_ = false;
    if (!ok) {
      // ferry closed its side (WritesDone) or the call broke: finish; the
      // handlers still running complete and their results are dropped.
      EndLocked(grpc::Status::OK);
      release = ReleaseLocked();
    } else {
      const ProcessRequest& req = *reading_->request();
      switch (req.kind_case()) {
        case ProcessRequest::kEvents:
          core_->events_messages.fetch_add(1, std::memory_order_relaxed);
          work = TakeEventsLocked();
          break;
        case ProcessRequest::kCancel:
          CancelLocked();
          break;
        default:
          Log("ignoring a ProcessRequest of unknown kind %d", static_cast<int>(req.kind_case()));
          break;
      }
      if (work == nullptr) reading_->Reset();  // else the work took it
      if (!finished_ && !ending_ && !call_over_) {
        StartReadLocked();
      } else {
        release = ReleaseLocked();
      }
    }
  }
  if (work != nullptr) Dispatch(work);
  if (release) Unref();  // last: Dispatch's references are taken by now
}

void Stream::Dispatch(const std::shared_ptr<MessageWork>& work) {
  if (core_->options.inline_handlers) {
    // The reference keeps `this` while Work runs: the last unit's result may
    // let the call end, and the call's reference go, before Work returns.
    Ref();
    Work(work);
    Unref();
    return;
  }
  // One pool task per handler thread (at most one per unit), each taking
  // the message's next unit until none is left: one pool lock and wake-up
  // per thread, not per event, and a slow event holds up only its thread.
  const size_t tasks =
      std::min(work->units(), static_cast<size_t>(core_->options.handler_threads));
  // Each task holds its own reference: another task may hand over every
  // unit's result (and with them the events' references) before this one
  // starts.
  for (size_t t = 0; t < tasks; ++t) {
    Ref();
    if (core_->pool.Schedule([this, work] {
          Work(work);
          Unref();
        })) {
      continue;
    }
    Unref();  // not the last: the message's events hold theirs
    // The pool stopped: whatever no task takes fails here.
    ResultBuffer out;
    for (size_t u = work->TakeUnit(); u < work->units(); u = work->TakeUnit()) {
      for (int i : work->members(u)) out.Add(work->event(i).id(), Outcome::Fail("worker stopped"));
    }
    Flush(&out);
    return;
  }
}

void Stream::OnWriteDone(bool ok) {
  bool release;
  {
    absl::MutexLock l(&mu_);
    write_in_flight_ = false;
    if (!ok) EndLocked(grpc::Status(grpc::StatusCode::UNAVAILABLE, "write failed"));
    PumpLocked();
    release = ReleaseLocked();
  }
  if (release) Unref();
}

void Stream::OnFinishDone(bool /*ok*/) {
  bool release;
  {
    absl::MutexLock l(&mu_);
    finish_pending_ = false;
    // A read still pending would keep the call (and its reference) alive
    // until ferry closes its side; the status is sent, so end it now.
    if (read_pending_) call_->context.TryCancel();
    release = ReleaseLocked();
  }
  if (release) Unref();
}

void Stream::OnCallDone(bool /*ok*/) {
  bool release;
  {
    absl::MutexLock l(&mu_);
    call_done_pending_ = false;
    call_over_ = true;
    // Cancelled (ferry went away, a deadline, the server's Shutdown) or
    // finished: either way nothing more is sent.
    EndLocked(grpc::Status::CANCELLED);
    release = ReleaseLocked();
  }
  if (release) Unref();
}

void Stream::RequestFinish(grpc::Status status) {
  absl::MutexLock l(&mu_);
  if (finish_requested_) return;
  finish_requested_ = true;
  may_skip_.store(true, std::memory_order_release);
  finish_status_ = std::move(status);
  PumpLocked();
}

void Stream::EndLocked(grpc::Status status) {
  may_skip_.store(true, std::memory_order_release);
  if (!ending_) {
    ending_ = true;
    end_status_ = std::move(status);
  }
  PumpLocked();
}

std::shared_ptr<MessageWork> Stream::TakeEventsLocked() {
  const int64_t n = reading_->request()->events().events_size();
  if (n == 0) return nullptr;
  core_->events_received.fetch_add(n, std::memory_order_relaxed);
  if (finished_ || ending_) return nullptr;
  {
    absl::MutexLock cl(&core_->mu);
    if (core_->draining) {
      // Not started: ferry redelivers them when this stream closes.
      return nullptr;
    }
    core_->running += n;
  }
  received_ += n;
  if (received_ > granted_) {
    const int64_t over = std::min(n, received_ - granted_);
    core_->credit_violations.fetch_add(over, std::memory_order_relaxed);
    Log("protocol violation: ferry sent %d event(s) beyond the %d credit granted; processing them",
        over, granted_);
  }
  held_ += n;
  core_->UpdateMaxHeld(held_);
  // The message's slot goes with the work (no copy) and a recycled one
  // takes the next read.
  auto work = std::make_shared<MessageWork>(std::move(reading_), slots_);
  reading_ = slots_->Get();
  inflight_.reserve(inflight_.size() + static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) ++inflight_[work->event(i).id()].count;
  refs_.fetch_add(static_cast<int>(n), std::memory_order_relaxed);  // one per event
  return work;
}

void Stream::CancelLocked() {
  std::vector<uint64_t> marked;
  for (uint64_t id : reading_->request()->cancel().ids()) {
    auto it = inflight_.find(id);
    if (it == inflight_.end() || it->second.cancelled) continue;  // done or unknown
    it->second.cancelled = true;
    marked.push_back(id);
  }
  if (marked.empty()) return;
  may_skip_.store(true, std::memory_order_release);
  absl::MutexLock cl(&core_->mu);
  for (uint64_t id : marked) ++core_->cancelled[id];
}

bool Stream::Skip(uint64_t id) {
  if (!may_skip_.load(std::memory_order_acquire)) return false;
  absl::MutexLock l(&mu_);
  if (finished_ || ending_) return true;
  auto it = inflight_.find(id);
  return it != inflight_.end() && it->second.cancelled;
}

void Stream::Complete(uint64_t id, Outcome outcome) {
  std::vector<Completed> one;
  one.push_back(Completed{id, std::move(outcome)});
  CompleteAll(&one);
}

void Stream::CompleteAll(std::vector<Completed>* items) {
  const int n = static_cast<int>(items->size());
  if (n == 0) return;
  {
    absl::MutexLock l(&mu_);
    std::vector<uint64_t> uncancel;
    for (Completed& c : *items) {
      auto it = inflight_.find(c.id);
      if (it == inflight_.end()) continue;
      c.cancelled = it->second.cancelled;
      if (--it->second.count == 0) {
        if (c.cancelled) uncancel.push_back(c.id);
        inflight_.erase(it);
      }
    }
    {
      // Under mu_: Shutdown sees running == 0 only with these results
      // queued (its RequestFinish needs mu_), and IsCancelled() forgets an
      // id before its credit is sent.
      absl::MutexLock cl(&core_->mu);
      core_->running -= n;
      for (uint64_t id : uncancel) {
        auto c = core_->cancelled.find(id);
        if (c != core_->cancelled.end() && --c->second == 0) core_->cancelled.erase(c);
      }
    }
    if (!finished_ && !ending_) {
      for (Completed& c : *items) completed_.push_back(std::move(c));
      PumpLocked();
    } else {
      held_ -= n;
    }
  }
  items->clear();
  if (refs_.fetch_sub(n, std::memory_order_acq_rel) == n) delete this;
}

void Stream::PumpLocked() {
  if (finished_ || write_in_flight_ || accept_pending_) return;
  if (ending_) {
    queue_.clear();
    held_ -= static_cast<int64_t>(completed_.size());
    completed_.clear();
    finished_ = true;
    if (!call_over_) StartFinishLocked(end_status_);  // else there is no one to tell
    return;
  }
  if (queue_.empty() && !completed_.empty() && BatchLocked()) {
    core_->results_messages.fetch_add(1, std::memory_order_relaxed);
    write_in_flight_ = true;
    call_->io.Write(write_buf_, &write_op_);
    return;
  }
  if (!queue_.empty()) {
    write_buf_ = std::move(queue_.front());
    queue_.pop_front();
    write_in_flight_ = true;
    call_->io.Write(write_buf_, &write_op_);
    return;
  }
  if (finish_requested_) {
    finished_ = true;
    StartFinishLocked(finish_status_);
  }
}

bool Stream::BatchLocked() {
  const size_t n =
      std::min(completed_.size(), static_cast<size_t>(core_->options.max_results_batch));
  // Built in write_buf_ itself: when it held the last Results, its Result
  // objects are cleared and reused instead of allocated again.
  ferry::v1::Results* results = write_buf_.mutable_results();
  results->set_credit(0);
  auto* list = results->mutable_results();
  list->Clear();
  for (size_t i = 0; i < n; ++i) {
    const Completed& c = completed_[i];
    if (!c.cancelled) ToResult(c, list->Add());
  }
  completed_.erase(completed_.begin(), completed_.begin() + static_cast<std::ptrdiff_t>(n));
  held_ -= static_cast<int64_t>(n);
  // Draining (shutting down): no new work, so no credit.
  const bool grant = !core_->shutting_down.load(std::memory_order_acquire);
  if (grant) granted_ += static_cast<int64_t>(n);
  if (grant && results_carry_credit_) {
    results->set_credit(static_cast<uint32_t>(n));
    return true;
  }
  if (grant) {
    ProcessResponse credit;
    credit.mutable_credit()->set_n(static_cast<uint32_t>(n));
    queue_.push_back(std::move(credit));
  }
  return !list->empty();
}

}  // namespace ferry::sdk::internal
