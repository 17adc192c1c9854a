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

ferry::v1::Result ToResult(uint64_t id, const Outcome& outcome) {
  ferry::v1::Result r;
  r.set_id(id);
  switch (outcome.kind()) {
    case Outcome::Kind::kOk:
      r.set_status(ferry::v1::Result::OK);
      break;
    case Outcome::Kind::kRetry: {
      r.set_status(ferry::v1::Result::RETRY);
      absl::Duration after = outcome.retry_after();
      if (after > absl::ZeroDuration()) {
        int64_t ms = absl::ToInt64Milliseconds(absl::Ceil(after, absl::Milliseconds(1)));
        r.set_retry_after_ms(static_cast<uint32_t>(
            std::min<int64_t>(ms, std::numeric_limits<uint32_t>::max())));
      }
      break;
    }
    case Outcome::Kind::kFail:
      r.set_status(ferry::v1::Result::FAIL);
      break;
  }
  if (!outcome.message().empty()) r.set_message(outcome.message());
  return r;
}

}  // namespace

Stream::Stream(std::shared_ptr<Worker::Core> core, bool results_carry_credit)
    : core_(std::move(core)), results_carry_credit_(results_carry_credit) {
  bool reject;
  {
    absl::MutexLock cl(&core_->mu);
    reject = core_->draining;
    if (!reject) core_->streams.insert(this);
  }
  absl::MutexLock l(&mu_);
  if (reject) {
    finished_ = true;
    Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE, "worker shutting down"));
    return;
  }
  ProcessResponse ready;
  ready.mutable_ready()->set_max_in_flight(static_cast<uint32_t>(core_->options.max_in_flight));
  ready.mutable_ready()->set_worker_name(core_->options.name);
  queue_.push_back(std::move(ready));
  granted_ = core_->options.max_in_flight;
  StartRead(&req_);
  PumpLocked();
}

void Stream::Unref() {
  if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
}

void Stream::OnReadDone(bool ok) {
  std::vector<std::shared_ptr<ferry::v1::Event>> to_run;
  {
    absl::MutexLock l(&mu_);
    if (!ok) {
      // ferry closed its side (WritesDone) or the call broke: finish; the
      // handlers still running complete and their results are dropped.
      EndLocked(grpc::Status::OK);
      return;
    }
    switch (req_.kind_case()) {
      case ProcessRequest::kEvents:
        TakeEventsLocked(&to_run);
        break;
      case ProcessRequest::kCancel:
        CancelLocked();
        break;
      default:
        Log("ignoring a ProcessRequest of unknown kind %d", static_cast<int>(req_.kind_case()));
        break;
    }
    req_.Clear();
    if (!finished_ && !ending_) StartRead(&req_);
  }
  if (to_run.empty()) return;
  // One pool task per handler thread (at most one per event), each taking
  // the message's next event until none is left: one pool lock and wake-up
  // per thread, not per event, and a slow event holds up only its thread.
  struct RunState {
    std::vector<std::shared_ptr<ferry::v1::Event>> events;
    std::atomic<size_t> next{0};
  };
  auto run = std::make_shared<RunState>();
  run->events = std::move(to_run);
  const size_t tasks =
      std::min(run->events.size(), static_cast<size_t>(core_->options.handler_threads));
  for (size_t t = 0; t < tasks; ++t) {
    bool scheduled = core_->pool.Schedule([this, run] {
      for (size_t i = run->next.fetch_add(1); i < run->events.size();
           i = run->next.fetch_add(1)) {
        Run(run->events[i]);
      }
    });
    if (!scheduled) {
      // The pool stopped: whatever no task takes fails here.
      for (size_t i = run->next.fetch_add(1); i < run->events.size();
           i = run->next.fetch_add(1)) {
        Complete(run->events[i]->id(), Outcome::Fail("worker stopped"));
      }
    }
  }
}

void Stream::OnWriteDone(bool ok) {
  absl::MutexLock l(&mu_);
  write_in_flight_ = false;
  if (!ok) EndLocked(grpc::Status(grpc::StatusCode::UNAVAILABLE, "write failed"));
  PumpLocked();
}

void Stream::OnCancel() {
  absl::MutexLock l(&mu_);
  EndLocked(grpc::Status::CANCELLED);
}

void Stream::OnDone() {
  // gRPC runs OnDone after every other reaction (OnCancel included) has
  // returned, but it orders them inside libgrpc++, where ThreadSanitizer
  // cannot see it. Taking mu_ once makes that order visible: every reaction
  // touches the stream under mu_, so its release happens before this.
  { absl::MutexLock l(&mu_); }
  {
    absl::MutexLock cl(&core_->mu);
    core_->streams.erase(this);
  }
  Unref();
}

void Stream::RequestFinish(grpc::Status status) {
  absl::MutexLock l(&mu_);
  if (finish_requested_) return;
  finish_requested_ = true;
  finish_status_ = std::move(status);
  PumpLocked();
}

void Stream::EndLocked(grpc::Status status) {
  if (!ending_) {
    ending_ = true;
    end_status_ = std::move(status);
  }
  PumpLocked();
}

void Stream::TakeEventsLocked(std::vector<std::shared_ptr<ferry::v1::Event>>* to_run) {
  const int64_t n = req_.events().events_size();
  if (n == 0) return;
  core_->events_received.fetch_add(n, std::memory_order_relaxed);
  if (finished_ || ending_) return;
  {
    absl::MutexLock cl(&core_->mu);
    if (core_->draining) {
      // Not started: ferry redelivers them when this stream closes.
      return;
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
  // The message's events stay in one shared Events (swapped out of req_,
  // no copy); each task holds an aliasing pointer to its event, so there is
  // one allocation per message, not per event.
  auto batch = std::make_shared<ferry::v1::Events>();
  batch->Swap(req_.mutable_events());
  to_run->reserve(n);
  for (int i = 0; i < n; ++i) {
    std::shared_ptr<ferry::v1::Event> ev(batch, batch->mutable_events(i));
    ++inflight_[ev->id()].count;
    to_run->push_back(std::move(ev));
    Ref();
  }
}

void Stream::CancelLocked() {
  std::vector<uint64_t> marked;
  for (uint64_t id : req_.cancel().ids()) {
    auto it = inflight_.find(id);
    if (it == inflight_.end() || it->second.cancelled) continue;  // done or unknown
    it->second.cancelled = true;
    marked.push_back(id);
  }
  if (marked.empty()) return;
  absl::MutexLock cl(&core_->mu);
  for (uint64_t id : marked) ++core_->cancelled[id];
}

void Stream::Run(const std::shared_ptr<ferry::v1::Event>& ev) {
  bool skip;
  {
    absl::MutexLock l(&mu_);
    auto it = inflight_.find(ev->id());
    skip = finished_ || ending_ || (it != inflight_.end() && it->second.cancelled);
  }
  if (skip) {  // cancelled before it started, or nobody listens: no result is sent
    Complete(ev->id(), Outcome::Ok());
    return;
  }
  if (core_->handler) {
    Outcome outcome = Outcome::Ok();
    try {
      outcome = core_->handler(*ev);
    } catch (const std::exception& e) {
      outcome = Outcome::Fail(e.what());
    } catch (...) {
      outcome = Outcome::Fail("handler threw a non-std::exception");
    }
    Complete(ev->id(), outcome);
    return;
  }
  auto done = std::make_shared<AsyncDone>(this, ev);
  try {
    core_->async_handler(*ev, [done](Outcome outcome) { done->Call(std::move(outcome)); });
  } catch (const std::exception& e) {
    done->Call(Outcome::Fail(e.what()));
  } catch (...) {
    done->Call(Outcome::Fail("handler threw a non-std::exception"));
  }
}

void Stream::Complete(uint64_t id, const Outcome& outcome) {
  {
    absl::MutexLock l(&mu_);
    bool uncancel = false;
    bool cancelled = false;
    auto it = inflight_.find(id);
    if (it != inflight_.end()) {
      cancelled = it->second.cancelled;
      if (--it->second.count == 0) {
        inflight_.erase(it);
        uncancel = cancelled;
      }
    }
    {
      // Under mu_: Shutdown sees running == 0 only with this result queued
      // (its RequestFinish needs mu_), and IsCancelled() forgets the id
      // before the credit is sent.
      absl::MutexLock cl(&core_->mu);
      --core_->running;
      if (uncancel) {
        auto c = core_->cancelled.find(id);
        if (c != core_->cancelled.end() && --c->second == 0) core_->cancelled.erase(c);
      }
    }
    if (!finished_ && !ending_) {
      completed_.push_back(Completed{id, outcome, cancelled});
      PumpLocked();
    } else {
      --held_;
    }
  }
  Unref();
}

void Stream::PumpLocked() {
  if (finished_ || write_in_flight_) return;
  if (ending_) {
    queue_.clear();
    held_ -= static_cast<int64_t>(completed_.size());
    completed_.clear();
    finished_ = true;
    Finish(end_status_);
    return;
  }
  if (queue_.empty() && !completed_.empty()) BatchLocked();
  if (!queue_.empty()) {
    write_buf_ = std::move(queue_.front());
    queue_.pop_front();
    write_in_flight_ = true;
    StartWrite(&write_buf_);
    return;
  }
  if (finish_requested_) {
    finished_ = true;
    Finish(finish_status_);
  }
}

void Stream::BatchLocked() {
  const size_t n =
      std::min(completed_.size(), static_cast<size_t>(core_->options.max_results_batch));
  ProcessResponse results;
  auto* list = results.mutable_results()->mutable_results();
  for (size_t i = 0; i < n; ++i) {
    const Completed& c = completed_[i];
    if (!c.cancelled) *list->Add() = ToResult(c.id, c.outcome);
  }
  completed_.erase(completed_.begin(), completed_.begin() + static_cast<std::ptrdiff_t>(n));
  held_ -= static_cast<int64_t>(n);
  // Draining (shutting down): no new work, so no credit.
  const bool grant = !core_->shutting_down.load(std::memory_order_acquire);
  if (grant) granted_ += static_cast<int64_t>(n);
  if (grant && results_carry_credit_) {
    results.mutable_results()->set_credit(static_cast<uint32_t>(n));
    queue_.push_back(std::move(results));
    return;
  }
  if (!list->empty()) queue_.push_back(std::move(results));
  if (grant) {
    ProcessResponse credit;
    credit.mutable_credit()->set_n(static_cast<uint32_t>(n));
    queue_.push_back(std::move(credit));
  }
}

}  // namespace ferry::sdk::internal
