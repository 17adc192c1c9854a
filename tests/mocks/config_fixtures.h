// Shared set-up for the config unit tests (core/config/config_test.cc,
// core/config/config_load_test.cc, core/config/config_files_test.cc): the minimal valid
// config text and files written under the test's temporary directory. One
// copy here instead of one per test file.
//
// Threading: plain functions with no state of their own; call them from the
// test's thread. Tests running in parallel get their own TEST_TMPDIR from
// Bazel.
#ifndef FERRY_TESTS_MOCKS_CONFIG_FIXTURES_H_
#define FERRY_TESTS_MOCKS_CONFIG_FIXTURES_H_

#include <string>

namespace ferry::testing {

// A minimal valid config (one topic, one processor); tests append or replace
// sections. Its last line is line 5, so an appended section starts on line 6.
inline constexpr char kMinimal[] = R"(topics:
  - name: orders
processors:
  - name: default
    target: ipv4:127.0.0.1:50051
)";

// $TEST_TMPDIR, or /tmp outside Bazel.
std::string TestTmpDir();

// Writes `contents` to TestTmpDir()/`name` (replacing it) and returns the
// path; a file that cannot be written is a test failure.
std::string WriteTempFile(const std::string& name, const std::string& contents);

}  // namespace ferry::testing

#endif  // FERRY_TESTS_MOCKS_CONFIG_FIXTURES_H_
