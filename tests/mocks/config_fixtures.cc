#include "tests/mocks/config_fixtures.h"

#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace ferry::testing {

std::string TestTmpDir() {
  const char* tmp = std::getenv("TEST_TMPDIR");
  return tmp != nullptr ? tmp : "/tmp";
}

std::string WriteTempFile(const std::string& name, const std::string& contents) {
  const std::string path = absl::StrCat(TestTmpDir(), "/", name);
  std::FILE* f = std::fopen(path.c_str(), "wb");
  EXPECT_NE(f, nullptr) << path;
  if (f == nullptr) return path;
  std::fwrite(contents.data(), 1, contents.size(), f);
  std::fclose(f);
  return path;
}

}  // namespace ferry::testing
