#include "core/common/log.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/strings/ascii.h"
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

LogFormat FormatFromEnvironment() {
  const char* value = std::getenv("FERRY_LOG_FORMAT");
  return value != nullptr && std::string(value) == "json" ? LogFormat::kJson : LogFormat::kText;
}

std::atomic<LogFormat>& CurrentFormat() {
  static std::atomic<LogFormat> format{FormatFromEnvironment()};
  return format;
}

// JSON string contents: quotes, backslashes and control characters escaped.
void AppendJsonEscaped(std::string* out, absl::string_view text) {
  for (const char c : text) {
    switch (c) {
      case '"':
        out->append("\\\"");
        break;
      case '\\':
        out->append("\\\\");
        break;
      case '\n':
        out->append("\\n");
        break;
      case '\r':
        out->append("\\r");
        break;
      case '\t':
        out->append("\\t");
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char escaped[8];
          std::snprintf(escaped, sizeof(escaped), "\\u%04x", static_cast<unsigned char>(c));
          out->append(escaped);
        } else {
          out->push_back(c);
        }
    }
  }
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

void SetLogFormat(LogFormat format) { CurrentFormat().store(format); }

std::string FormatLogLine(LogFormat format, absl::Time time, LogLevel level,
                          absl::string_view component, absl::string_view message) {
  const std::string timestamp = absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", time, absl::UTCTimeZone());
  if (format == LogFormat::kText) {
    return absl::StrCat(timestamp, " ", LevelName(level), " ", component, ": ", message);
  }
  std::string line = absl::StrCat("{\"time\":\"", timestamp, "\",\"level\":\"",
                                  absl::AsciiStrToLower(LevelName(level)),
                                  "\",\"component\":\"");
  AppendJsonEscaped(&line, component);
  line.append("\",\"msg\":\"");
  AppendJsonEscaped(&line, message);
  line.append("\"}");
  return line;
}

void Log(LogLevel level, absl::string_view component, absl::string_view message) {
  std::string line = FormatLogLine(CurrentFormat().load(), absl::Now(), level, component, message);
  line.push_back('\n');
  std::fwrite(line.data(), 1, line.size(), stderr);
}

bool LogRateLimiter::Allow(absl::Time now, int64_t* suppressed) {
  if (now - window_start_ >= window_) {
    window_start_ = now;
    in_window_ = 0;
  }
  if (in_window_ >= burst_) {
    ++suppressed_;
    return false;
  }
  ++in_window_;
  *suppressed = suppressed_;
  suppressed_ = 0;
  return true;
}

}  // namespace ferry
