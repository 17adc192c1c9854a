// ReflectionClient: the client side of gRPC server reflection
// (grpc.reflection.v1alpha.ServerReflection), which Debian's gRPC does not
// ship, for tests that check what a server describes: the calls grpcurl
// makes for `describe` and for calling a method without a local .proto.
//
// The request and response messages come from the descriptors that
// libgrpc++_reflection registers in protobuf's generated pool; the calls use
// raw bytes.
//
// Threading: one owner thread; each call blocks up to its deadline.
#ifndef FERRY_TESTS_E2E_REFLECTION_CLIENT_H_
#define FERRY_TESTS_E2E_REFLECTION_CLIENT_H_

#include <google/protobuf/descriptor.pb.h>
#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace ferry::testing {

class ReflectionClient {
 public:
  // `target` like "127.0.0.1:PORT" (plaintext).
  explicit ReflectionClient(const std::string& target);

  // file_containing_symbol: the files the server serves for `symbol` (the
  // defining file first). The server's error_response becomes a status with
  // its code and message (NOT_FOUND "Symbol not found: ...").
  absl::StatusOr<std::vector<google::protobuf::FileDescriptorProto>> FileContainingSymbol(
      const std::string& symbol);

  // A unary call with serialized request bytes ("/pkg.Service/Method");
  // returns the response bytes.
  absl::StatusOr<std::string> UnaryCall(const std::string& method, const std::string& request);

 private:
  std::shared_ptr<grpc::Channel> channel_;
};

}  // namespace ferry::testing

#endif  // FERRY_TESTS_E2E_REFLECTION_CLIENT_H_
