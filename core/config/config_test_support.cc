#include "core/config/config_test_support.h"

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "core/config/config.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ferry::testing {

std::string ExpectError(const std::string& yaml, int line, const std::string& path) {
  absl::StatusOr<Config> config = ParseConfig(yaml, "ferry.yaml");
  EXPECT_FALSE(config.ok()) << "parsed unexpectedly:\n" << yaml;
  if (config.ok()) return "";
  EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
  const std::string prefix = path.empty() ? absl::StrCat("ferry.yaml:", line, ": ")
                                          : absl::StrCat("ferry.yaml:", line, ": ", path, ": ");
  EXPECT_THAT(std::string(config.status().message()), ::testing::StartsWith(prefix))
      << "yaml:\n"
      << yaml;
  return std::string(config.status().message());
}

}  // namespace ferry::testing
