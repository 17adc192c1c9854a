// main() of the network-fault tests: the process enters its own network
// namespace (netns.h) before gtest starts, so the broker, Toxiproxy, ferry and
// the workers it starts share a private 127.0.0.1 that nftables rules can cut
// without touching the machine's. A process that cannot enter one fails (the
// tests need root); nothing is skipped.
#include <cstdio>

#include "gtest/gtest.h"
#include "tests/netfaults/netns.h"

int main(int argc, char** argv) {
  const absl::Status entered = ferry::testing::EnterPrivateNetwork();
  if (!entered.ok()) {
    std::fprintf(stderr, "netfaults: cannot enter a private network namespace: %s\n",
                 entered.ToString().c_str());
    return 1;
  }
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
