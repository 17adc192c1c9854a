#include "core/engine/committer.h"

#include <algorithm>

#include "core/common/log.h"

namespace ferry {

Committer::Committer(Engine* engine, OffsetCommitter* kafka, absl::Duration commit_interval,
                     absl::Duration tick)
    : engine_(engine),
      kafka_(kafka),
      commit_interval_(commit_interval),
      tick_(std::min(tick, commit_interval)) {}

Committer::~Committer() { Stop(); }

void Committer::Start() {
  thread_ = std::thread([this] { Run(); });
}

void Committer::Stop() {
  if (stopped_) return;
  stopped_ = true;
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
  CommitNow().IgnoreError();  // logged inside
}

absl::Status Committer::CommitNow() {
  const std::vector<CommitPosition> positions = engine_->PendingCommits();
  if (positions.empty()) return absl::OkStatus();
  absl::Status status = kafka_->Commit(positions);
  if (status.ok()) {
    engine_->MarkCommitted(positions);
  } else {
    LogWarn("committer", "commit failed (will retry): ", status.ToString());
  }
  return status;
}

void Committer::Run() {
  absl::Time next_commit = absl::Now() + commit_interval_;
  absl::MutexLock lock(&mu_);
  while (!stopping_) {
    // A timed wait on the stop condition: wakes at once on Stop().
    mu_.AwaitWithTimeout(absl::Condition(&stopping_), tick_);
    if (stopping_) break;
    mu_.Unlock();
    engine_->OnTimer();
    if (absl::Now() >= next_commit) {
      CommitNow().IgnoreError();
      next_commit = absl::Now() + commit_interval_;
    }
    mu_.Lock();
  }
}

}  // namespace ferry
