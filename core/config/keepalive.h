// How soon ferry notices that a worker host has vanished (its link drops
// every packet, no RST): gRPC keepalive on the channels to a processor's
// workers. ferry pings every `interval`; a ping unanswered within `timeout`
// ends the connection, its streams close and their in-flight events are
// redelivered to the other streams. So a vanished worker is noticed within
// Bound() = interval + timeout (README, "What ferry guarantees").
//
// Workers must permit pings this often: gRPC servers refuse frequent pings on
// an idle connection by default (GOAWAY too_many_pings). ferry's SDKs permit
// kMinKeepaliveInterval; plain-gRPC workers set
// grpc.http2.min_ping_interval_without_data_ms at most the interval.
//
// Threading: plain values.
#ifndef FERRY_CORE_CONFIG_KEEPALIVE_H_
#define FERRY_CORE_CONFIG_KEEPALIVE_H_

#include "absl/time/time.h"

namespace ferry {

// The shortest interval ferry accepts, and the one the SDKs permit.
inline constexpr absl::Duration kMinKeepaliveInterval = absl::Seconds(1);
inline constexpr absl::Duration kMinKeepaliveTimeout = absl::Seconds(1);

// `processors[i].keepalive`: {interval, timeout}.
struct KeepaliveConfig {
  absl::Duration interval = absl::Seconds(5);
  absl::Duration timeout = absl::Seconds(5);
  // The longest a vanished worker's events wait before redelivery.
  absl::Duration Bound() const { return interval + timeout; }
};

}  // namespace ferry

#endif  // FERRY_CORE_CONFIG_KEEPALIVE_H_
