// kafka_tool offsets / wait-committed: a group's committed vs end offsets.
#include <algorithm>
#include <cstdio>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "tests/tools/kafka_admin.h"
#include "tests/tools/kafka_tool_commands.h"

namespace ferry::test_tools {
namespace {

bool Validate(const OffsetsOptions& o, const char* command) {
  const char* problem = nullptr;
  if (o.bootstrap.empty()) problem = "--bootstrap is required";
  else if (o.topic.empty()) problem = "--topic is required";
  else if (o.group.empty()) problem = "--group is required";
  if (problem == nullptr) return true;
  std::fprintf(stderr, "%s: %s\n", command, problem);
  return false;
}

}  // namespace

int RunOffsets(const OffsetsOptions& o) {
  if (!Validate(o, "offsets")) return kExitUsage;
  absl::StatusOr<GroupProgress> progress =
      ReadGroupProgress(o.bootstrap, o.topic, o.group);
  if (!progress.ok()) {
    std::fprintf(stderr, "offsets: %s\n", progress.status().ToString().c_str());
    return kExitFailure;
  }
  std::fputs(FormatGroupProgress(*progress).c_str(), stdout);
  return kExitOk;
}

int RunWaitCommitted(const WaitCommittedOptions& w) {
  const OffsetsOptions& o = w.offsets;
  if (!Validate(o, "wait-committed")) return kExitUsage;
  const absl::Time deadline = absl::Now() + w.timeout;
  std::string last_state = "(no successful read)\n";
  std::string last_error;
  for (;;) {
    // Never let one slow query run far past the overall deadline.
    const absl::Duration call_timeout = std::clamp(
        deadline - absl::Now(), absl::Seconds(1), kDefaultAdminTimeout);
    absl::StatusOr<GroupProgress> progress =
        ReadGroupProgress(o.bootstrap, o.topic, o.group, call_timeout);
    if (progress.ok()) {
      last_state = FormatGroupProgress(*progress);
      last_error.clear();
      if (progress->AllCommitted()) {
        std::fputs(last_state.c_str(), stdout);
        return kExitOk;
      }
    } else {
      // Transient while the broker or group coordinator is starting: retry.
      last_error = progress.status().ToString();
    }
    if (absl::Now() + w.poll_interval >= deadline) break;
    absl::SleepFor(w.poll_interval);
  }
  std::fputs(last_state.c_str(), stdout);
  std::fflush(stdout);
  std::fprintf(stderr, "wait-committed: timed out after %s%s%s\n",
               absl::FormatDuration(w.timeout).c_str(),
               last_error.empty() ? "" : "; last error: ",
               last_error.c_str());
  return kExitFailure;
}

}  // namespace ferry::test_tools
