// Test-only expectations shared by the ParseConfig tests of core/config (the
// config_*_test.cc files split by section); the config text and temp files
// they start from are in tests/mocks/config_fixtures.h.
//
// Threading: call from the test's thread.
#ifndef FERRY_CORE_CONFIG_CONFIG_TEST_SUPPORT_H_
#define FERRY_CORE_CONFIG_CONFIG_TEST_SUPPORT_H_

#include <string>

namespace ferry::testing {

// Parses `yaml` as "ferry.yaml" and expects an InvalidArgument error that
// starts with `ferry.yaml:<line>: <path>: ` (`ferry.yaml:<line>: ` when path is
// empty); returns the message for further checks ("" when it parsed).
std::string ExpectError(const std::string& yaml, int line, const std::string& path);

}  // namespace ferry::testing

#endif  // FERRY_CORE_CONFIG_CONFIG_TEST_SUPPORT_H_
