#include "core/engine/committer.h"

#include "core/common/log.h"

namespace ferry {

Committer::Committer(Engine* engine, OffsetCommitter* kafka, absl::Duration commit_interval)
    : engine_(engine),
      kafka_(kafka),
      thread_([this] { CommitNow().IgnoreError(); }, commit_interval) {}

Committer::~Committer() { Stop(); }

void Committer::Start() { thread_.Start(); }

void Committer::Stop() {
  if (stopped_) return;
  stopped_ = true;
  thread_.Stop();
  CommitNow().IgnoreError();  // the final commit; logged inside
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

}  // namespace ferry
