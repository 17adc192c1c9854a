#include "server/replica_identity.h"

#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace ferry {
namespace {

TEST(ReplicaIdentityTest, AConfiguredClientIdIsTheIdentity) {
  EXPECT_EQ(ReplicaIdentity({{"client.id", "orders-ferry-7d9f"}, {"group.id", "g"}}),
            "orders-ferry-7d9f");
}

TEST(ReplicaIdentityTest, WithoutOneItIsFerryHostAndPid) {
  char host[256] = {0};
  ASSERT_EQ(gethostname(host, sizeof(host) - 1), 0);
  const std::string expected = absl::StrCat("ferry-", host, "/", getpid());
  EXPECT_EQ(ReplicaIdentity({{"group.id", "g"}}), expected);
  EXPECT_EQ(ReplicaIdentity({{"client.id", ""}}), expected) << "an empty client.id names nobody";
}

}  // namespace
}  // namespace ferry
