#include "tests/e2e/sanitizer_reports.h"

#include <cstdlib>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace ferry::testing {
namespace {

constexpr char kTsanLog[] =
    "ferry: consuming topic events\n"
    "==================\n"
    "WARNING: ThreadSanitizer: data race (pid=4242)\n"
    "  Write of size 8 at 0x7b0c00000010 by thread T3:\n"
    "    #0 ferry::Engine::Flush() core/engine/engine.cc:100 (libcore_Slibengine.so+0x1)\n"
    "SUMMARY: ThreadSanitizer: data race core/engine/engine.cc:100 in ferry::Engine::Flush()\n";

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return absl::StrCat(dir != nullptr ? dir : "/tmp", "/", name);
}

void WriteFile(const std::string& path, const std::string& contents) {
  std::ofstream out(path, std::ios::trunc);
  out << contents;
}

TEST(FindSanitizerReportTest, FindsEachRuntimesHeadline) {
  const std::string log = kTsanLog;
  EXPECT_EQ(FindSanitizerReport(log), log.substr(log.find("WARNING")));
  EXPECT_NE(FindSanitizerReport("==1==ERROR: AddressSanitizer: heap-use-after-free on\n"), "");
  EXPECT_NE(FindSanitizerReport("==1==ERROR: LeakSanitizer: detected memory leaks\n"), "");
  EXPECT_NE(FindSanitizerReport("core/engine/lanes.cc:12:5: runtime error: signed integer overflow\n"),
            "");
}

TEST(FindSanitizerReportTest, CleanLogsAndLookalikesHaveNone) {
  EXPECT_EQ(FindSanitizerReport(""), "");
  EXPECT_EQ(FindSanitizerReport("ferry: built with ThreadSanitizer\nruntime error budget: 3\n"),
            "");
  EXPECT_EQ(FindSanitizerReport(std::string("\0\xff\xfe garbage\n", 12)), "");
}

TEST(FindSanitizerReportTest, KeepsOnlyTheFirstLinesOfALongReport) {
  std::string log = "WARNING: ThreadSanitizer: data race\n";
  for (int i = 0; i < 1000; ++i) absl::StrAppend(&log, "    #", i, " frame\n");
  const std::string report = FindSanitizerReport(log, 5);
  EXPECT_EQ(report, "WARNING: ThreadSanitizer: data race\n    #0 frame\n    #1 frame\n"
                    "    #2 frame\n    #3 frame\n    #4 frame\n");
}

// One test for the registry: it is process-wide, and what it collects stays.
TEST(ChildLogRegistryTest, ReportsFromCurrentAndReusedLogs) {
  const std::string clean = TempPath("clean.log");
  const std::string reused = TempPath("reused.log");
  WriteFile(clean, "worker: ready\n");
  WatchChildLog(clean);
  WatchChildLog(TempPath("never_written.log"));
  EXPECT_EQ(CollectChildSanitizerReports(), "");

  // A first child raced and a second one reused (truncated) its log: the
  // first child's report is kept from just before the second started.
  WriteFile(reused, kTsanLog);
  WatchChildLog(reused);
  WatchChildLog(reused);
  WriteFile(reused, "ferry: clean second run\n");
  std::string reports = CollectChildSanitizerReports();
  EXPECT_NE(reports.find(absl::StrCat(reused, ":\nWARNING: ThreadSanitizer: data race")),
            std::string::npos)
      << reports;
  EXPECT_EQ(reports.find(clean), std::string::npos) << reports;

  WriteFile(clean, "==7==ERROR: AddressSanitizer: stack-buffer-overflow\n");
  reports = CollectChildSanitizerReports();
  EXPECT_NE(reports.find(absl::StrCat(clean, ":\n==7==ERROR: AddressSanitizer")),
            std::string::npos)
      << reports;
}

}  // namespace
}  // namespace ferry::testing
