// The network-fault harness's packet part: a private network namespace for
// the whole test process and nftables rules inside it that drop packets of
// one TCP port silently (no RST, no FIN: the peers' kernels retransmit until
// the rule goes, as across a real partition) or drop a share of them at
// random (packet loss: TCP recovers by retransmission, with the delays that
// brings). `tc netem` is not available in this kernel; nf_tables is.
//
// Everything a test starts (broker, Toxiproxy, ferry, workers) inherits the
// namespace and talks over its own 127.0.0.1, so rules never touch the
// machine's loopback and vanish with the test process. Needs root (CAP_NET_ADMIN
// and CAP_SYS_ADMIN, which Bazel's sandbox keeps for root) and the `nft`
// binary (tools/setup installs nftables; FERRY_NFT names another one).
//
// Threading: EnterPrivateNetwork() from main() before any thread starts (a
// namespace change applies to the calling thread and what it creates later).
// A PacketFilter from one test thread.
#ifndef FERRY_TESTS_NETFAULTS_NETNS_H_
#define FERRY_TESTS_NETFAULTS_NETNS_H_

#include <set>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace ferry::testing {

// Moves this process into a new network namespace and brings its loopback up.
absl::Status EnterPrivateNetwork();

// nftables rules of this namespace, per TCP port (either direction: both the
// packets to the port and its answers).
class PacketFilter {
 public:
  // Creates the (empty) table; fails when nft is missing or not permitted.
  static absl::StatusOr<PacketFilter> Create();

  // Every packet to or from `port` is dropped until Heal(port).
  absl::Status Drop(int port);
  // About `percent` of the packets to or from `port` are dropped (nftables
  // numgen random), until Heal(port).
  absl::Status Lose(int port, int percent);
  // Removes the rules of `port`.
  absl::Status Heal(int port);

 private:
  PacketFilter() = default;
  absl::Status EnsurePortChain(int port);
  std::set<int> chains_;
};

}  // namespace ferry::testing

#endif  // FERRY_TESTS_NETFAULTS_NETNS_H_
