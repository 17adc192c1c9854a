// Log: ferry's one-line structured log, `time level component: message k=v`.
//
// Small on purpose: lines go to stderr (Kubernetes collects them), a level
// filter comes from FERRY_LOG_LEVEL (debug|info|warn|error, default info), and
// there is no per-record logging at info. FERRY_LOG_FORMAT=json (or the
// config's `log.format: json`) writes one JSON object per line instead:
//   {"time":"2024-05-01T12:00:00.000Z","level":"info","component":"engine","msg":"..."}
//
// Threading: safe from any thread; each line is written with one call.
#ifndef FERRY_CORE_COMMON_LOG_H_
#define FERRY_CORE_COMMON_LOG_H_

#include <cstdint>

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace ferry {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3 };

enum class LogFormat { kText, kJson };

bool LogEnabled(LogLevel level);
// Overrides FERRY_LOG_FORMAT (call before other threads log).
void SetLogFormat(LogFormat format);
// One line as Log() writes it (without the newline), for tests.
std::string FormatLogLine(LogFormat format, absl::Time time, LogLevel level,
                          absl::string_view component, absl::string_view message);
void Log(LogLevel level, absl::string_view component, absl::string_view message);

// Keeps a log line that can repeat per record (a failure, a dead letter)
// from flooding the log: at most `burst` lines per `window`; the next line
// after a quiet spell says how many were suppressed. Not thread-safe: guard
// it with the caller's lock.
class LogRateLimiter {
 public:
  LogRateLimiter(int burst, absl::Duration window) : burst_(burst), window_(window) {}
  // True if a line may be written at `now`; `suppressed` gets the number of
  // lines dropped since the last one written.
  bool Allow(absl::Time now, int64_t* suppressed);

 private:
  const int burst_;
  const absl::Duration window_;
  absl::Time window_start_ = absl::InfinitePast();
  int in_window_ = 0;
  int64_t suppressed_ = 0;
};

template <typename... Args>
void LogInfo(absl::string_view component, const Args&... args) {
  if (LogEnabled(LogLevel::kInfo)) Log(LogLevel::kInfo, component, absl::StrCat(args...));
}
template <typename... Args>
void LogWarn(absl::string_view component, const Args&... args) {
  if (LogEnabled(LogLevel::kWarn)) Log(LogLevel::kWarn, component, absl::StrCat(args...));
}
template <typename... Args>
void LogError(absl::string_view component, const Args&... args) {
  if (LogEnabled(LogLevel::kError)) Log(LogLevel::kError, component, absl::StrCat(args...));
}
template <typename... Args>
void LogDebug(absl::string_view component, const Args&... args) {
  if (LogEnabled(LogLevel::kDebug)) Log(LogLevel::kDebug, component, absl::StrCat(args...));
}

}  // namespace ferry

#endif  // FERRY_CORE_COMMON_LOG_H_
