// Health: ferry's gRPC health service (grpc.health.v1.Health) on its own
// server and on the optional plaintext probe port.
//
// Statuses: "" (the whole server) and "ferry.v1.Control" answer SERVING from
// start until the shutdown begins, then NOT_SERVING (readiness goes first, so
// Kubernetes stops routing to a draining pod). The health proto's
// descriptors are linked in, so server reflection can describe the service
// and grpcurl can call it without a local health.proto.
//
// Threading: EnableHealthService before any ServerBuilder is built;
// SetServing from any thread.
#ifndef FERRY_SERVER_HEALTH_H_
#define FERRY_SERVER_HEALTH_H_

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "server/reflection_service.h"

namespace ferry {

// The service names with a health status of their own.
inline constexpr char kControlServiceName[] = "ferry.v1.Control";

// Turns on gRPC's default health service for every server built afterwards
// and makes sure grpc.health.v1's descriptors are in the generated pool.
void EnableHealthService();

// Sets "" and every name above to SERVING or NOT_SERVING on `server`.
void SetServing(grpc::Server& server, bool serving);

// server.health_listen: a plaintext server with the health service and
// `reflection` (which must outlive it, and serve no other server), nothing
// else, for probes that cannot speak TLS (the kubelet's gRPC probe); SERVING
// from the start. An error when `address` cannot be bound.
absl::StatusOr<std::unique_ptr<grpc::Server>> StartPlaintextHealthServer(
    const std::string& address, ReflectionService* reflection);

}  // namespace ferry

#endif  // FERRY_SERVER_HEALTH_H_
