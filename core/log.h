// Log: ferry's one-line structured log, `time level component: message k=v`.
//
// Small on purpose: lines go to stderr (Kubernetes collects them), a level
// filter comes from FERRY_LOG_LEVEL (debug|info|warn|error, default info), and
// there is no per-record logging at info.
//
// Threading: safe from any thread; each line is written with one call.
#ifndef FERRY_CORE_LOG_H_
#define FERRY_CORE_LOG_H_

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace ferry {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3 };

bool LogEnabled(LogLevel level);
void Log(LogLevel level, absl::string_view component, absl::string_view message);

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

#endif  // FERRY_CORE_LOG_H_
