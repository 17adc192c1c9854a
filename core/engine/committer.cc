#include "core/engine/committer.h"

#include "core/common/log.h"

namespace ferry {

Committer::Committer(Engine* engine, OffsetCommitter* kafka, absl::Duration commit_interval)
    : engine_(engine), kafka_(kafka), commit_interval_(commit_interval) {}

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
  absl::MutexLock lock(&mu_);
  while (!stopping_) {
    // A timed wait on the stop condition: wakes at once on Stop().
    mu_.AwaitWithTimeout(absl::Condition(&stopping_), commit_interval_);
    if (stopping_) break;
    mu_.Unlock();
    CommitNow().IgnoreError();
    mu_.Lock();
  }
}

}  // namespace ferry
