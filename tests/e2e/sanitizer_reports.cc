#include "tests/e2e/sanitizer_reports.h"

#include <fstream>
#include <set>
#include <sstream>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"

namespace ferry::testing {
namespace {

// Headlines the sanitizer runtimes print at the start of a report. UBSan's
// "runtime error:" follows a source location on the same line.
constexpr const char* kHeadlines[] = {
    "WARNING: ThreadSanitizer:", "ERROR: ThreadSanitizer:", "ERROR: AddressSanitizer:",
    "ERROR: LeakSanitizer:",     ": runtime error: ",
};

struct Registry {
  absl::Mutex mutex;
  std::set<std::string> paths ABSL_GUARDED_BY(mutex);
  // Reports from logs that were reused by a later child.
  std::vector<std::string> earlier ABSL_GUARDED_BY(mutex);
};

Registry& GetRegistry() {
  static Registry* registry = new Registry;
  return *registry;
}

std::string ReportIn(const std::string& path) {
  std::ifstream in(path);
  if (!in) return "";
  std::stringstream contents;
  contents << in.rdbuf();
  const std::string report = FindSanitizerReport(contents.str());
  return report.empty() ? "" : absl::StrCat(path, ":\n", report);
}

}  // namespace

std::string FindSanitizerReport(const std::string& log, int max_lines) {
  std::vector<absl::string_view> lines = absl::StrSplit(log, '\n', absl::SkipEmpty());
  for (size_t i = 0; i < lines.size(); ++i) {
    for (const char* headline : kHeadlines) {
      if (lines[i].find(headline) == absl::string_view::npos) continue;
      std::string report;
      for (size_t j = i; j < lines.size() && j <= i + static_cast<size_t>(max_lines); ++j) {
        absl::StrAppend(&report, lines[j], "\n");
      }
      return report;
    }
  }
  return "";
}

void WatchChildLog(const std::string& log_path) {
  Registry& registry = GetRegistry();
  absl::MutexLock lock(&registry.mutex);
  if (!registry.paths.insert(log_path).second) {
    std::string report = ReportIn(log_path);
    if (!report.empty()) registry.earlier.push_back(std::move(report));
  }
}

std::string CollectChildSanitizerReports() {
  Registry& registry = GetRegistry();
  absl::MutexLock lock(&registry.mutex);
  std::string all;
  for (const std::string& report : registry.earlier) absl::StrAppend(&all, report, "\n");
  for (const std::string& path : registry.paths) {
    const std::string report = ReportIn(path);
    if (!report.empty()) absl::StrAppend(&all, report, "\n");
  }
  return all;
}

}  // namespace ferry::testing
