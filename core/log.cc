#include "core/log.h"

#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace ferry {
namespace {

LogLevel LevelFromEnvironment() {
  const char* value = std::getenv("FERRY_LOG_LEVEL");
  if (value == nullptr) return LogLevel::kInfo;
  const std::string level(value);
  if (level == "debug") return LogLevel::kDebug;
  if (level == "warn") return LogLevel::kWarn;
  if (level == "error") return LogLevel::kError;
  return LogLevel::kInfo;
}

const char* LevelName(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug:
      return "DEBUG";
    case LogLevel::kInfo:
      return "INFO";
    case LogLevel::kWarn:
      return "WARN";
    case LogLevel::kError:
      return "ERROR";
  }
  return "INFO";
}

}  // namespace

bool LogEnabled(LogLevel level) {
  static const LogLevel minimum = LevelFromEnvironment();
  return level >= minimum;
}

void Log(LogLevel level, absl::string_view component, absl::string_view message) {
  const std::string line =
      absl::StrCat(absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", absl::Now(), absl::UTCTimeZone()),
                   " ", LevelName(level), " ", component, ": ", message, "\n");
  std::fwrite(line.data(), 1, line.size(), stderr);
}

}  // namespace ferry
