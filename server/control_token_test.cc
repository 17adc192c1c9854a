#include "server/control_token.h"

#include <cstdlib>
#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ferry {
namespace {

using ::testing::HasSubstr;

std::string WriteFile(const std::string& name, const std::string& contents) {
  const char* dir = std::getenv("TEST_TMPDIR");
  const std::string path = std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
  std::ofstream(path, std::ios::binary) << contents;
  return path;
}

TEST(ControlTokenTest, NoFileMeansNoToken) {
  absl::StatusOr<std::string> token = ReadControlToken("");
  ASSERT_TRUE(token.ok());
  EXPECT_EQ(*token, "");
}

TEST(ControlTokenTest, SurroundingWhitespaceIsNotPartOfTheToken) {
  absl::StatusOr<std::string> token = ReadControlToken(WriteFile("token", "  s3cret \n"));
  ASSERT_TRUE(token.ok()) << token.status();
  EXPECT_EQ(*token, "s3cret");
}

TEST(ControlTokenTest, MissingOrBlankFileIsAConfigError) {
  absl::StatusOr<std::string> missing = ReadControlToken("/nonexistent/ferry-token");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(missing.status().message(), HasSubstr("control.token_file: cannot read"));

  absl::StatusOr<std::string> blank = ReadControlToken(WriteFile("blank", " \n\t\n"));
  ASSERT_FALSE(blank.ok());
  EXPECT_THAT(blank.status().message(), HasSubstr("is empty; put the token in it"));
}

}  // namespace
}  // namespace ferry
