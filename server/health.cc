#include "server/health.h"

#include <grpcpp/health_check_service_interface.h>

#include "absl/strings/str_cat.h"
#include "core/common/log.h"
#include "grpc/health/v1/health.pb.h"
#include "server/reflection_service.h"

namespace ferry {

void EnableHealthService() {
  grpc::EnableDefaultHealthCheckService(true);
  // Referencing the generated descriptor keeps health.pb.cc in the link (a
  // static library's unreferenced object would be dropped, and with it the
  // descriptors reflection looks up).
  (void)grpc::health::v1::HealthCheckRequest::descriptor();
}

void SetServing(grpc::Server& server, bool serving) {
  grpc::HealthCheckServiceInterface* health = server.GetHealthCheckService();
  if (health == nullptr) return;
  health->SetServingStatus(serving);
  health->SetServingStatus(kControlServiceName, serving);
}

absl::StatusOr<std::unique_ptr<grpc::Server>> StartPlaintextHealthServer(
    const std::string& address, ReflectionService* reflection) {
  grpc::ServerBuilder builder;
  // gRPC's health service is added inside Start, so without this the builder
  // would see no service at all and refuse to build.
  builder.RegisterCallbackGenericService(reflection);
  RemoveSyncReflectionPlugin(builder);  // callback services only: no sync poller
  int port = 0;
  builder.AddListeningPort(address, grpc::InsecureServerCredentials(), &port);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0) {
    return absl::UnavailableError(absl::StrCat(
        "cannot listen on ", address, " (server.health_listen): address in use or invalid"));
  }
  SetServing(*server, true);
  LogInfo("ferry", "serving plaintext health on port ", port, " (server.health_listen)");
  return server;
}

}  // namespace ferry
