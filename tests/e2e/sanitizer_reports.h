// SanitizerReports: makes a sanitizer report in a child process fail the test
// that started it. Under --config=tsan (and the ASan/UBSan config) a race or
// memory error in ferry, a worker or the mock cluster is printed to that
// child's log, not to the test's own output, and the child may well keep
// running or be killed by the test later; nothing would fail. Subprocess
// registers every child's log here, and its gtest environment
// (subprocess.cc) fails the test binary at its end with the reports' first
// lines: from every log as it is then, and from a log reused for a new child,
// as it was just before the new child truncated it.
//
// Threading: all functions are thread-safe.
#ifndef FERRY_TESTS_E2E_SANITIZER_REPORTS_H_
#define FERRY_TESTS_E2E_SANITIZER_REPORTS_H_

#include <string>

namespace ferry::testing {

// The first sanitizer report in `log` (its headline and up to `max_lines`
// lines after it), or "" when there is none.
std::string FindSanitizerReport(const std::string& log, int max_lines = 30);

// Called by Subprocess::Start before a child writes `log_path`: scans what a
// previous child left there, then remembers the path for the final scan.
void WatchChildLog(const std::string& log_path);

// Scans every watched log now and returns the reports found so far, each
// headed by its log's path; "" when there are none.
std::string CollectChildSanitizerReports();

}  // namespace ferry::testing

#endif  // FERRY_TESTS_E2E_SANITIZER_REPORTS_H_
