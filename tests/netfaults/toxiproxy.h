// The network-fault harness's TCP part: a real Toxiproxy server process on a
// free loopback port and a small client of its HTTP API. A test puts a proxy
// between two of its processes (ferry and a worker, say) and then adds or
// removes "toxics" on it: latency, a bandwidth cap, a blackhole (every byte
// dropped, the connection left open: what a peer sees when a host vanishes
// without a RST), a reset (RST after a delay), or disables the proxy (every
// connection closed, new ones refused).
//
// The server binary is installed by tools/setup (pinned Go module
// github.com/Shopify/toxiproxy/v2); FERRY_TOXIPROXY names another one.
//
// Threading: one test thread owns a Toxiproxy. The destructor stops the
// server (killing it if needed), which closes every proxied connection.
#ifndef FERRY_TESTS_NETFAULTS_TOXIPROXY_H_
#define FERRY_TESTS_NETFAULTS_TOXIPROXY_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "tests/e2e/subprocess.h"

namespace ferry::testing {

// Which way a toxic acts: upstream is client -> proxied server (for ferry and
// a worker: ferry's requests), downstream is the answers.
enum class ToxicStream { kUpstream, kDownstream };

struct Toxic {
  std::string name;  // unique per proxy
  std::string type;  // latency, bandwidth, timeout, reset_peer, ...
  ToxicStream stream = ToxicStream::kDownstream;
  double toxicity = 1.0;  // the share of connections it applies to
  std::map<std::string, int64_t> attributes;
};

// Toxics of the kinds the tests use. `name` defaults to type-direction.
Toxic LatencyToxic(ToxicStream stream, int64_t latency_ms, int64_t jitter_ms = 0);
Toxic BandwidthToxic(ToxicStream stream, int64_t kilobytes_per_second);
// `timeout` with timeout=0: data is dropped and the connection stays open
// until the toxic is removed (a silent drop, no FIN, no RST).
Toxic BlackholeToxic(ToxicStream stream);
// Cuts a connection `after_ms` (0: at once) after the next bytes the client
// sends on it, on existing and new connections (on kUpstream, Toxiproxy's
// reading of the client). Toxiproxy closes with SO_LINGER 0 (a RST); the
// client sees the RST, or a FIN when the close of the other direction wins.
Toxic ResetPeerToxic(ToxicStream stream, int64_t after_ms);

class Toxiproxy {
 public:
  // Starts the server on a free 127.0.0.1 port and waits (bounded) until its
  // API answers. `name` names its log in the test's temp dir.
  static absl::StatusOr<std::unique_ptr<Toxiproxy>> Start(const std::string& name);
  ~Toxiproxy();
  Toxiproxy(const Toxiproxy&) = delete;
  Toxiproxy& operator=(const Toxiproxy&) = delete;

  // Creates proxy `proxy` on a free 127.0.0.1 port forwarding to `upstream`
  // ("127.0.0.1:port"); returns the port it listens on.
  absl::StatusOr<int> CreateProxy(const std::string& proxy, const std::string& upstream);
  // Disabled: every connection through it is closed and new ones refused.
  absl::Status SetEnabled(const std::string& proxy, bool enabled);
  absl::Status AddToxic(const std::string& proxy, const Toxic& toxic);
  absl::Status RemoveToxic(const std::string& proxy, const std::string& toxic_name);

  // The link through `proxy` goes silent both ways (BlackholeToxic up and
  // down); Heal removes them again. Healing closes (FIN) the connections
  // that lived through the silence, as Toxiproxy does when a timeout toxic
  // goes; new connections pass again.
  absl::Status Blackhole(const std::string& proxy);
  absl::Status Heal(const std::string& proxy);

  int api_port() const { return api_port_; }
  const Subprocess& process() const { return process_; }

 private:
  Toxiproxy(Subprocess process, int api_port)
      : process_(std::move(process)), api_port_(api_port) {}
  // One request to the API; the response body, or an error carrying the
  // status code and body when it is not 2xx.
  absl::StatusOr<std::string> Request(const std::string& method, const std::string& path,
                                      const std::string& body);

  Subprocess process_;
  int api_port_;
};

// The Toxiproxy server binary (FERRY_TOXIPROXY, else tools/setup's path).
std::string ToxiproxyBinary();

// A loopback TCP port that was free a moment ago (bind to port 0, close).
// Callers retry if it is taken by the time they bind it.
absl::StatusOr<int> PickFreePort();

}  // namespace ferry::testing

#endif  // FERRY_TESTS_NETFAULTS_TOXIPROXY_H_
