#include "server/health.h"

#include <grpcpp/health_check_service_interface.h>

#include "grpc/health/v1/health.pb.h"

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

}  // namespace ferry
