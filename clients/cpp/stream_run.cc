// Runs on the worker side: MessageWork's grouping and the Stream methods
// that handle a unit (an independent event or a run), sync or async. See
// stream_run.h and "Runs" in proto/ferry/v1/processor.proto.
#include "clients/cpp/stream_run.h"

#include <atomic>
#include <exception>
#include <memory>
#include <string>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "clients/cpp/stream.h"

namespace ferry::sdk::internal {

namespace {

google::protobuf::ArenaOptions FirstBlock(char* block, size_t size) {
  google::protobuf::ArenaOptions options;
  options.initial_block = block;
  options.initial_block_size = size;
  return options;
}

}  // namespace

ReadSlot::ReadSlot()
    : first_block_(new char[kFirstBlock]),
      arena_(FirstBlock(first_block_.get(), kFirstBlock)),
      request_(google::protobuf::Arena::CreateMessage<ferry::v1::ProcessRequest>(&arena_)) {}

void ReadSlot::Reset() {
  arena_.Reset();
  request_ = google::protobuf::Arena::CreateMessage<ferry::v1::ProcessRequest>(&arena_);
}

std::unique_ptr<ReadSlot> SlotPool::Get() {
  {
    absl::MutexLock l(&mu_);
    if (!free_.empty()) {
      std::unique_ptr<ReadSlot> slot = std::move(free_.back());
      free_.pop_back();
      return slot;
    }
  }
  return std::make_unique<ReadSlot>();
}

void SlotPool::Put(std::unique_ptr<ReadSlot> slot) {
  slot->Reset();  // outside the lock
  absl::MutexLock l(&mu_);
  if (free_.size() < kMaxFree) free_.push_back(std::move(slot));
}

MessageWork::MessageWork(std::unique_ptr<ReadSlot> slot, std::shared_ptr<SlotPool> pool)
    : pool_(std::move(pool)), slot_(std::move(slot)), events_(slot_->request()->events()) {
  const int n = events_.events_size();
  order_.reserve(static_cast<size_t>(n));
  starts_.reserve(static_cast<size_t>(n) + 1);
  bool any_run = false;
  for (int i = 0; i < n && !any_run; ++i) any_run = events_.events(i).run_id() != 0;
  if (!any_run) {  // the common case: every event is its own unit
    for (int i = 0; i < n; ++i) {
      order_.push_back(i);
      starts_.push_back(static_cast<uint32_t>(i));
    }
    starts_.push_back(static_cast<uint32_t>(n));
    return;
  }
  // Units in the order of their first event; a run's members in message
  // order (a run need not be contiguous in the message).
  std::vector<int> unit_of(static_cast<size_t>(n));
  std::vector<uint32_t> sizes;
  absl::flat_hash_map<uint64_t, int> run_unit;
  for (int i = 0; i < n; ++i) {
    const uint64_t run = events_.events(i).run_id();
    int u = static_cast<int>(sizes.size());
    if (run != 0) {
      auto [it, inserted] = run_unit.try_emplace(run, u);
      u = it->second;
      if (!inserted) {
        unit_of[static_cast<size_t>(i)] = u;
        ++sizes[static_cast<size_t>(u)];
        continue;
      }
    }
    unit_of[static_cast<size_t>(i)] = u;
    sizes.push_back(1);
  }
  uint32_t at = 0;
  for (uint32_t size : sizes) {
    starts_.push_back(at);
    at += size;
  }
  starts_.push_back(at);
  std::vector<uint32_t> fill(starts_.begin(), starts_.end() - 1);
  order_.resize(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) order_[fill[static_cast<size_t>(unit_of[static_cast<size_t>(i)])]++] = i;
}

// One async member's `done`: completes the event exactly once (FAIL when the
// handler drops `done` without calling it) and continues its unit. Whoever
// comes second of "the handler returned" and "done was called" continues:
// the handler's caller inline when done came first (no hand-off), else done
// through the pool.
class Stream::AsyncMember {
 public:
  AsyncMember(Stream* stream, std::shared_ptr<MessageWork> work, size_t unit, size_t member)
      : stream_(stream), work_(std::move(work)), unit_(unit), member_(member) {}
  ~AsyncMember() {
    if (!called_.load(std::memory_order_acquire)) {
      End(Outcome::Fail("async handler dropped its done callback without calling it"));
    }
  }
  AsyncMember(const AsyncMember&) = delete;
  AsyncMember& operator=(const AsyncMember&) = delete;

  const ferry::v1::Event& event() const {
    return work_->event(work_->members(unit_)[member_]);
  }

  void Call(Outcome outcome) {
    if (called_.exchange(true, std::memory_order_acq_rel)) {
      Log("done called more than once for event %d; ignored", event().id());
      return;
    }
    End(std::move(outcome));
  }

  // The handler returned. True: done was called already and ended_ok()
  // tells the caller whether to go on with the unit.
  bool HandlerReturned() { return (state_.fetch_or(kReturned, std::memory_order_acq_rel) & kDone) != 0; }
  bool ended_ok() const { return ok_; }

 private:
  static constexpr int kReturned = 1;
  static constexpr int kDone = 2;

  void End(Outcome outcome) {
    const uint64_t id = event().id();
    const size_t next = member_ + 1;
    const bool more = next < work_->members(unit_).size();
    // Decided before Complete: the stream may be gone after it when this
    // was its last event (a later member holds a reference otherwise).
    ok_ = outcome.kind() == Outcome::Kind::kOk && !(more && stream_->Skip(id));
    stream_->Complete(id, std::move(outcome));
    if (!more) return;
    if ((state_.fetch_or(kDone, std::memory_order_acq_rel) & kReturned) != 0) {
      stream_->ContinueUnit(work_, unit_, next, ok_);
    }
  }

  Stream* const stream_;
  const std::shared_ptr<MessageWork> work_;  // keeps the event valid until done
  const size_t unit_;
  const size_t member_;
  std::atomic<bool> called_{false};
  std::atomic<int> state_{0};
  bool ok_ = false;  // written before kDone is set, read after seeing it
};

void Stream::Work(const std::shared_ptr<MessageWork>& work) {
  ResultBuffer out;
  for (size_t u = work->TakeUnit(); u < work->units(); u = work->TakeUnit()) {
    RunUnit(work, u, 0, &out);
  }
  Flush(&out);  // the task's own reference keeps `this`
}

void Stream::NotAttempted(const MessageWork& work, size_t u, size_t from, ResultBuffer* out) {
  absl::Span<const int> members = work.members(u);
  for (size_t k = from; k < members.size(); ++k) {
    out->Add(work.event(members[k]).id(), Outcome::Ok(), /*not_attempted=*/true);
  }
}

void Stream::RunUnit(const std::shared_ptr<MessageWork>& work, size_t u, size_t from,
                     ResultBuffer* out) {
  const size_t size = work->members(u).size();
  for (size_t k = from; k < size; ++k) {
    const ferry::v1::Event& ev = work->event(work->members(u)[k]);
    // A graceful stop ends a run after the member that was running.
    if (k > 0 && core_->shutting_down.load(std::memory_order_acquire)) {
      NotAttempted(*work, u, k, out);
      return;
    }
    if (Skip(ev.id())) {  // cancelled before it started, or nobody listens: no result
      out->Add(ev.id(), Outcome::Ok());
      NotAttempted(*work, u, k + 1, out);
      return;
    }
    // What finished goes out before a handler that may be slow; inline
    // handlers never block, so a message's results go out together.
    if (!out->empty() && !core_->options.inline_handlers) Flush(out);
    if (core_->handler) {
      Outcome outcome = Outcome::Ok();
      try {
        outcome = core_->handler(ev);
      } catch (const std::exception& e) {
        outcome = Outcome::Fail(e.what());
      } catch (...) {
        outcome = Outcome::Fail("handler threw a non-std::exception");
      }
      const bool ok = outcome.kind() == Outcome::Kind::kOk;
      out->Add(ev.id(), std::move(outcome));
      // Cancelled while it ran: ferry drops its result, so the run stops too.
      if (k + 1 < size && (!ok || Skip(ev.id()))) {
        NotAttempted(*work, u, k + 1, out);
        return;
      }
      continue;
    }
    auto member = std::make_shared<AsyncMember>(this, work, u, k);
    try {
      core_->async_handler(ev, [member](Outcome outcome) { member->Call(std::move(outcome)); });
    } catch (const std::exception& e) {
      member->Call(Outcome::Fail(e.what()));
    } catch (...) {
      member->Call(Outcome::Fail("handler threw a non-std::exception"));
    }
    if (k + 1 == size) return;
    if (!member->HandlerReturned()) return;  // its done continues the unit
    if (!member->ended_ok()) {
      NotAttempted(*work, u, k + 1, out);
      return;
    }
  }
}

void Stream::ContinueUnit(std::shared_ptr<MessageWork> work, size_t u, size_t next, bool ok) {
  ResultBuffer out;
  if (ok) {
    // The task holds its own reference: the unit's last member may hand its
    // result over inside RunUnit (a dropped `done` does), and the Flush after
    // it is still a call on `this`.
    Ref();
    const bool scheduled = core_->pool.Schedule([this, work, u, next] {
      ResultBuffer out;
      RunUnit(work, u, next, &out);
      Flush(&out);
      Unref();
    });
    if (scheduled) return;
    Unref();  // not the last: members `next` on still hold theirs
  }
  // Not OK, or the pool stopped (the stream is finished: nobody listens).
  NotAttempted(*work, u, next, &out);
  Flush(&out);
}

}  // namespace ferry::sdk::internal
