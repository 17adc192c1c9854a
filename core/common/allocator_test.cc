#include "core/common/allocator.h"

#include <cstdlib>

#include "gtest/gtest.h"

namespace ferry {
namespace {

#ifdef FERRY_TCMALLOC
// The ferry binary's build: tcmalloc linked, its default release rate 1.0.
TEST(AllocatorTest, AnOperatorsReleaseRateIsLeftAlone) {
  ASSERT_EQ(unsetenv("TCMALLOC_RELEASE_RATE"), 0);
  const double before = AllocatorReleaseRate();
  ASSERT_GT(before, 0) << "tcmalloc's default release rate is 1.0 unless the variable was set";
  ASSERT_EQ(setenv("TCMALLOC_RELEASE_RATE", "2", 1), 0);
  EXPECT_FALSE(KeepFreedMemoryMapped());
  EXPECT_EQ(AllocatorReleaseRate(), before);
  ASSERT_EQ(unsetenv("TCMALLOC_RELEASE_RATE"), 0);
}

TEST(AllocatorTest, FreedMemoryStaysMappedByDefault) {
  ASSERT_EQ(unsetenv("TCMALLOC_RELEASE_RATE"), 0);
  EXPECT_TRUE(KeepFreedMemoryMapped());
  EXPECT_EQ(AllocatorReleaseRate(), 0);
}
#else
// Sanitizer builds: no tcmalloc (the sanitizers bring their own allocator).
TEST(AllocatorTest, WithoutTcmallocNothingIsDone) {
  EXPECT_FALSE(KeepFreedMemoryMapped());
  EXPECT_EQ(AllocatorReleaseRate(), -1);
}
#endif

}  // namespace
}  // namespace ferry
