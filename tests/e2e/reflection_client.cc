#include "tests/e2e/reflection_client.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>
#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/impl/client_unary_call.h>
#include <grpcpp/support/sync_stream.h>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace ferry::testing {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::DescriptorPool;
using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::MessageFactory;

constexpr char kReflectionMethod[] =
    "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo";

grpc::ByteBuffer ToByteBuffer(const std::string& bytes) {
  grpc::Slice slice(bytes);
  return grpc::ByteBuffer(&slice, 1);
}

absl::StatusOr<std::string> FromByteBuffer(const grpc::ByteBuffer& buffer) {
  std::vector<grpc::Slice> slices;
  if (!buffer.Dump(&slices).ok()) return absl::InternalError("unreadable response bytes");
  std::string bytes;
  for (const grpc::Slice& slice : slices) {
    bytes.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
  }
  return bytes;
}

// An empty message of a type from the generated pool (libgrpc++_reflection's).
absl::StatusOr<std::unique_ptr<Message>> NewGenerated(const std::string& type) {
  // Referencing the library keeps it linked, and with it its descriptors.
  (void)&grpc::reflection::InitProtoReflectionServerBuilderPlugin;
  const Descriptor* descriptor = DescriptorPool::generated_pool()->FindMessageTypeByName(type);
  if (descriptor == nullptr) return absl::InternalError(absl::StrCat("no descriptor for ", type));
  const Message* prototype = MessageFactory::generated_factory()->GetPrototype(descriptor);
  if (prototype == nullptr) return absl::InternalError(absl::StrCat("no prototype for ", type));
  return std::unique_ptr<Message>(prototype->New());
}

}  // namespace

ReflectionClient::ReflectionClient(const std::string& target)
    : channel_(grpc::CreateChannel(target, grpc::InsecureChannelCredentials())) {}

absl::StatusOr<std::vector<google::protobuf::FileDescriptorProto>>
ReflectionClient::FileContainingSymbol(const std::string& symbol) {
  absl::StatusOr<std::unique_ptr<Message>> request =
      NewGenerated("grpc.reflection.v1alpha.ServerReflectionRequest");
  absl::StatusOr<std::unique_ptr<Message>> response =
      NewGenerated("grpc.reflection.v1alpha.ServerReflectionResponse");
  if (!request.ok()) return request.status();
  if (!response.ok()) return response.status();
  (*request)->GetReflection()->SetString(
      request->get(), (*request)->GetDescriptor()->FindFieldByName("file_containing_symbol"),
      symbol);

  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
  std::unique_ptr<grpc::ClientReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer>> stream(
      grpc::internal::ClientReaderWriterFactory<grpc::ByteBuffer, grpc::ByteBuffer>::Create(
          channel_.get(),
          grpc::internal::RpcMethod(kReflectionMethod, grpc::internal::RpcMethod::BIDI_STREAMING),
          &context));
  grpc::ByteBuffer answer;
  const bool sent = stream->Write(ToByteBuffer((*request)->SerializeAsString()));
  stream->WritesDone();
  const bool got = sent && stream->Read(&answer);
  const grpc::Status finished = stream->Finish();
  if (!finished.ok()) return absl::UnavailableError(finished.error_message());
  if (!got) return absl::InternalError("no reflection response");
  absl::StatusOr<std::string> bytes = FromByteBuffer(answer);
  if (!bytes.ok()) return bytes.status();
  if (!(*response)->ParseFromString(*bytes)) return absl::InternalError("bad reflection response");

  const Message& message = **response;
  const google::protobuf::Reflection* reflection = message.GetReflection();
  const Descriptor* type = message.GetDescriptor();
  const FieldDescriptor* error_field = type->FindFieldByName("error_response");
  if (reflection->HasField(message, error_field)) {
    const Message& error = reflection->GetMessage(message, error_field);
    const google::protobuf::Reflection* error_reflection = error.GetReflection();
    const int code = error_reflection->GetInt32(
        error, error.GetDescriptor()->FindFieldByName("error_code"));
    const std::string text = error_reflection->GetString(
        error, error.GetDescriptor()->FindFieldByName("error_message"));
    return absl::Status(static_cast<absl::StatusCode>(code), text);
  }
  const FieldDescriptor* files_field = type->FindFieldByName("file_descriptor_response");
  if (!reflection->HasField(message, files_field)) {
    return absl::InternalError("reflection answered neither files nor an error");
  }
  const Message& files = reflection->GetMessage(message, files_field);
  const FieldDescriptor* protos = files.GetDescriptor()->FindFieldByName("file_descriptor_proto");
  std::vector<google::protobuf::FileDescriptorProto> parsed;
  for (int i = 0; i < files.GetReflection()->FieldSize(files, protos); ++i) {
    google::protobuf::FileDescriptorProto file;
    if (!file.ParseFromString(files.GetReflection()->GetRepeatedString(files, protos, i))) {
      return absl::InternalError("unparsable FileDescriptorProto");
    }
    parsed.push_back(std::move(file));
  }
  return parsed;
}

absl::StatusOr<std::string> ReflectionClient::UnaryCall(const std::string& method,
                                                        const std::string& request) {
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
  grpc::ByteBuffer response;
  const grpc::Status status = grpc::internal::BlockingUnaryCall(
      channel_.get(), grpc::internal::RpcMethod(method.c_str(), grpc::internal::RpcMethod::NORMAL_RPC),
      &context, ToByteBuffer(request), &response);
  if (!status.ok()) {
    return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                        status.error_message());
  }
  return FromByteBuffer(response);
}

}  // namespace ferry::testing
