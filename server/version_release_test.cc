// version.cc as a release build compiles it (-DNDEBUG, see BUILD.bazel):
// `ferry --version` must say release, and nothing about a debug build.
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/version.h"

namespace ferry {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(VersionReleaseTest, AReleaseBuildSaysSo) {
  EXPECT_EQ(BuildMode(), "release build");
  EXPECT_THAT(VersionText(), HasSubstr("(release build)"));
  EXPECT_THAT(VersionText(), Not(HasSubstr("ebug")));
}

}  // namespace
}  // namespace ferry
