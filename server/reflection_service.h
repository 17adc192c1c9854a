// ReflectionService: gRPC server reflection
// (grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo) as a
// callback generic service, so that ferry's gRPC server has no synchronous
// service at all: gRPC's own reflection service (libgrpc++_reflection) is
// synchronous, and any sync service makes the server run a sync poller
// thread which, under the epoll1 engine, wakes up for the whole process's
// worker-stream I/O.
//
// It answers what grpcurl asks: list_services, file_by_filename,
// file_containing_symbol, file_containing_extension and
// all_extension_numbers_of_type, from protobuf's generated pool (the
// descriptors of every generated proto linked into the binary). Debian ships
// no reflection .proto; the request and response messages are the ones
// libgrpc++_reflection registers in the generated pool, handled through
// protobuf's reflection API.
//
// Being the generic service, it also receives every method the server does
// not know: those end at once with UNIMPLEMENTED.
//
// Threading: construct and register before the server starts; the service
// must outlive the server. CreateReactor is called by gRPC on its callback
// threads, several at once (the service is immutable after construction).
// Each stream's reactor has one read or one write in flight at a time, so its
// reactions never overlap; each request is answered inline, in memory.
#ifndef FERRY_SERVER_REFLECTION_SERVICE_H_
#define FERRY_SERVER_REFLECTION_SERVICE_H_

#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/grpcpp.h>

#include <string>
#include <vector>

namespace ferry {

// grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo as a callback
// generic service; other unknown methods get UNIMPLEMENTED.
class ReflectionService final : public grpc::CallbackGenericService {
 public:
  // `services`: the full names list_services answers (e.g. "ferry.v1.Control",
  // "grpc.health.v1.Health"); "grpc.reflection.v1alpha.ServerReflection" is added.
  explicit ReflectionService(std::vector<std::string> services);
  grpc::ServerGenericBidiReactor* CreateReactor(
      grpc::GenericCallbackServerContext* context) override;

 private:
  const std::vector<std::string> services_;
};

// Loading libgrpc++_reflection (linked for its message descriptors) adds
// gRPC's own reflection plugin to every grpc::ServerBuilder of the process
// (a static initializer in the library). That plugin registers gRPC's
// synchronous reflection service, which would take the reflection method
// away from ReflectionService and bring back the sync poller thread. Call
// this on every builder before BuildAndStart: it drops that plugin (and only
// it) from `builder`.
void RemoveSyncReflectionPlugin(grpc::ServerBuilder& builder);

}  // namespace ferry

#endif  // FERRY_SERVER_REFLECTION_SERVICE_H_
