#include "server/reflection_service.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/descriptor.pb.h>
#include <google/protobuf/message.h>
#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/impl/codegen/proto_utils.h>
#include <grpcpp/impl/codegen/server_callback_handlers.h>
#include <grpcpp/impl/server_builder_option.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/common/log.h"

// The callback generic service's stream handler is grpcpp header code that
// otherwise only libgrpc++ instantiates, uninstrumented under ThreadSanitizer:
// its reactions' decrements of callbacks_outstanding_ were invisible, and the
// stream's destruction after OnDone looked like a race with its own Finish.
// Instantiated here, it is compiled with ferry's flags, and libgrpc++ uses
// this copy (its weak symbols resolve to the first definition loaded, as they
// already do for the CallOpSets ferry's generated code instantiates). The
// code is gRPC's own either way. Not in bazel/tsan_grpc_handoffs.cc: that is
// linked into every binary, most of which do not link gRPC.
template class grpc::internal::CallbackBidiHandler<grpc::ByteBuffer, grpc::ByteBuffer>;

namespace ferry {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::DescriptorPool;
using google::protobuf::FieldDescriptor;
using google::protobuf::FileDescriptor;
using google::protobuf::Message;
using google::protobuf::MessageFactory;
using google::protobuf::OneofDescriptor;
using google::protobuf::Reflection;
using Serializer = grpc::SerializationTraits<Message>;

constexpr char kReflectionService[] = "grpc.reflection.v1alpha.ServerReflection";
constexpr char kReflectionMethod[] =
    "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo";
constexpr char kRequestType[] = "grpc.reflection.v1alpha.ServerReflectionRequest";
constexpr char kResponseType[] = "grpc.reflection.v1alpha.ServerReflectionResponse";
// ProtoServerReflectionPlugin::name() in libgrpc++_reflection.
constexpr char kSyncReflectionPlugin[] = "proto_server_reflection";

// The reflection messages' fields, looked up by name once. Each one's type is
// checked then too: protobuf's reflection calls abort on a type mismatch.
struct Schema {
  const Message* request_prototype = nullptr;
  const Message* response_prototype = nullptr;
  // ServerReflectionRequest.
  const FieldDescriptor* host = nullptr;
  const OneofDescriptor* message_request = nullptr;
  const FieldDescriptor* file_by_filename = nullptr;
  const FieldDescriptor* file_containing_symbol = nullptr;
  const FieldDescriptor* file_containing_extension = nullptr;
  const FieldDescriptor* all_extension_numbers_of_type = nullptr;
  const FieldDescriptor* list_services = nullptr;
  // ExtensionRequest.
  const FieldDescriptor* containing_type = nullptr;
  const FieldDescriptor* extension_number = nullptr;
  // ServerReflectionResponse.
  const FieldDescriptor* valid_host = nullptr;
  const FieldDescriptor* original_request = nullptr;
  const FieldDescriptor* file_descriptor_response = nullptr;
  const FieldDescriptor* all_extension_numbers_response = nullptr;
  const FieldDescriptor* list_services_response = nullptr;
  const FieldDescriptor* error_response = nullptr;
  // FileDescriptorResponse, ExtensionNumberResponse, ListServiceResponse,
  // ServiceResponse and ErrorResponse.
  const FieldDescriptor* file_descriptor_proto = nullptr;
  const FieldDescriptor* base_type_name = nullptr;
  const FieldDescriptor* extension_numbers = nullptr;
  const FieldDescriptor* service = nullptr;
  const FieldDescriptor* service_name = nullptr;
  const FieldDescriptor* error_code = nullptr;
  const FieldDescriptor* error_message = nullptr;
};

// Finds fields by name and type, and remembers the ones it could not find.
class FieldFinder {
 public:
  const FieldDescriptor* Find(const Descriptor* type, const char* name,
                              FieldDescriptor::CppType cpp_type, bool repeated = false) {
    const FieldDescriptor* field = type == nullptr ? nullptr : type->FindFieldByName(name);
    if (field == nullptr || field->cpp_type() != cpp_type || field->is_repeated() != repeated) {
      missing_.push_back(name);
      return nullptr;
    }
    return field;
  }
  // The message type of `field` (null for a field not found).
  static const Descriptor* TypeOf(const FieldDescriptor* field) {
    return field == nullptr ? nullptr : field->message_type();
  }
  const std::vector<std::string>& missing() const { return missing_; }

 private:
  std::vector<std::string> missing_;
};

absl::StatusOr<Schema> ResolveSchema() {
  // A real reference to libgrpc++_reflection keeps it linked even under
  // --as-needed, and with it the message descriptors it registers.
  void (*volatile keep_linked)() = &grpc::reflection::InitProtoReflectionServerBuilderPlugin;
  (void)keep_linked;
  const DescriptorPool* pool = DescriptorPool::generated_pool();
  const Descriptor* request = pool->FindMessageTypeByName(kRequestType);
  const Descriptor* response = pool->FindMessageTypeByName(kResponseType);
  if (request == nullptr || response == nullptr) {
    return absl::InternalError("server reflection messages are not in the generated pool");
  }
  Schema s;
  s.request_prototype = MessageFactory::generated_factory()->GetPrototype(request);
  s.response_prototype = MessageFactory::generated_factory()->GetPrototype(response);
  s.message_request = request->FindOneofByName("message_request");

  using F = FieldDescriptor;
  FieldFinder f;
  s.host = f.Find(request, "host", F::CPPTYPE_STRING);
  s.file_by_filename = f.Find(request, "file_by_filename", F::CPPTYPE_STRING);
  s.file_containing_symbol = f.Find(request, "file_containing_symbol", F::CPPTYPE_STRING);
  s.file_containing_extension = f.Find(request, "file_containing_extension", F::CPPTYPE_MESSAGE);
  s.all_extension_numbers_of_type =
      f.Find(request, "all_extension_numbers_of_type", F::CPPTYPE_STRING);
  s.list_services = f.Find(request, "list_services", F::CPPTYPE_STRING);
  const Descriptor* extension_request = FieldFinder::TypeOf(s.file_containing_extension);
  s.containing_type = f.Find(extension_request, "containing_type", F::CPPTYPE_STRING);
  s.extension_number = f.Find(extension_request, "extension_number", F::CPPTYPE_INT32);

  s.valid_host = f.Find(response, "valid_host", F::CPPTYPE_STRING);
  s.original_request = f.Find(response, "original_request", F::CPPTYPE_MESSAGE);
  s.file_descriptor_response = f.Find(response, "file_descriptor_response", F::CPPTYPE_MESSAGE);
  s.all_extension_numbers_response =
      f.Find(response, "all_extension_numbers_response", F::CPPTYPE_MESSAGE);
  s.list_services_response = f.Find(response, "list_services_response", F::CPPTYPE_MESSAGE);
  s.error_response = f.Find(response, "error_response", F::CPPTYPE_MESSAGE);
  s.file_descriptor_proto = f.Find(FieldFinder::TypeOf(s.file_descriptor_response),
                                   "file_descriptor_proto", F::CPPTYPE_STRING, true);
  const Descriptor* numbers = FieldFinder::TypeOf(s.all_extension_numbers_response);
  s.base_type_name = f.Find(numbers, "base_type_name", F::CPPTYPE_STRING);
  s.extension_numbers = f.Find(numbers, "extension_number", F::CPPTYPE_INT32, true);
  s.service = f.Find(FieldFinder::TypeOf(s.list_services_response), "service",
                     F::CPPTYPE_MESSAGE, true);
  s.service_name = f.Find(FieldFinder::TypeOf(s.service), "name", F::CPPTYPE_STRING);
  const Descriptor* error = FieldFinder::TypeOf(s.error_response);
  s.error_code = f.Find(error, "error_code", F::CPPTYPE_INT32);
  s.error_message = f.Find(error, "error_message", F::CPPTYPE_STRING);

  if (!f.missing().empty()) {
    return absl::InternalError(absl::StrCat("server reflection messages lack the fields ",
                                            absl::StrJoin(f.missing(), ", ")));
  }
  // original_request is a copy of the request: CopyFrom needs the same type.
  if (s.request_prototype == nullptr || s.response_prototype == nullptr ||
      s.message_request == nullptr || s.original_request->message_type() != request) {
    return absl::InternalError("server reflection messages are not the expected ones");
  }
  return s;
}

// Resolved once per process: it only depends on the generated pool.
const absl::StatusOr<Schema>& GetSchema() {
  static const absl::StatusOr<Schema>* const schema = new absl::StatusOr<Schema>(ResolveSchema());
  return *schema;
}

// One stream's answers. It remembers the files the stream has been sent, so
// that each is sent at most once (a client keeps the files it received).
class Answerer {
 public:
  Answerer(const Schema& schema, const std::vector<std::string>& services)
      : s_(schema), services_(services) {}

  // Fills the empty ServerReflectionResponse `response` for `request`.
  void Answer(const Message& request, Message& response) {
    const Reflection& in = *request.GetReflection();
    const Reflection& out = *response.GetReflection();
    out.SetString(&response, s_.valid_host, in.GetString(request, s_.host));
    out.MutableMessage(&response, s_.original_request)->CopyFrom(request);
    const FieldDescriptor* asked = in.GetOneofFieldDescriptor(request, s_.message_request);
    const DescriptorPool& pool = *DescriptorPool::generated_pool();
    if (asked == nullptr) {
      Error(grpc::StatusCode::INVALID_ARGUMENT, "No message_request set.", response);
    } else if (asked == s_.list_services) {
      ListServices(response);
    } else if (asked == s_.file_by_filename) {
      const std::string name = in.GetString(request, asked);
      SendFiles(pool.FindFileByName(name), absl::StrCat("File not found: ", name), response);
    } else if (asked == s_.file_containing_symbol) {
      const std::string symbol = in.GetString(request, asked);
      SendFiles(pool.FindFileContainingSymbol(symbol), absl::StrCat("Symbol not found: ", symbol),
                response);
    } else if (asked == s_.file_containing_extension) {
      FileContainingExtension(in.GetMessage(request, asked), response);
    } else if (asked == s_.all_extension_numbers_of_type) {
      ExtensionNumbers(in.GetString(request, asked), response);
    } else {
      Error(grpc::StatusCode::UNIMPLEMENTED, absl::StrCat("Unsupported request: ", asked->name()),
            response);
    }
  }

 private:
  void ListServices(Message& response) {
    Message* list = response.GetReflection()->MutableMessage(&response, s_.list_services_response);
    for (const std::string& name : services_) {
      Message* service = list->GetReflection()->AddMessage(list, s_.service);
      service->GetReflection()->SetString(service, s_.service_name, name);
    }
  }

  // `file` first, always (the client asked for it), then its transitive
  // dependencies that this stream has not been sent yet. `not_found` is the
  // error when `file` is null.
  void SendFiles(const FileDescriptor* file, const std::string& not_found, Message& response) {
    if (file == nullptr) {
      Error(grpc::StatusCode::NOT_FOUND, not_found, response);
      return;
    }
    Message* files =
        response.GetReflection()->MutableMessage(&response, s_.file_descriptor_response);
    sent_files_.insert(file->name());
    std::vector<const FileDescriptor*> pending = {file};
    while (!pending.empty()) {
      const FileDescriptor* next = pending.back();
      pending.pop_back();
      google::protobuf::FileDescriptorProto proto;
      next->CopyTo(&proto);
      files->GetReflection()->AddString(files, s_.file_descriptor_proto, proto.SerializeAsString());
      for (int i = 0; i < next->dependency_count(); ++i) {
        // The generated pool builds dependencies lazily: null when one is
        // missing from the binary, and the client cannot be sent it.
        const FileDescriptor* dependency = next->dependency(i);
        if (dependency != nullptr && sent_files_.insert(dependency->name()).second) {
          pending.push_back(dependency);
        }
      }
    }
  }

  void FileContainingExtension(const Message& extension, Message& response) {
    const Reflection& in = *extension.GetReflection();
    const std::string type_name = in.GetString(extension, s_.containing_type);
    const int32_t number = in.GetInt32(extension, s_.extension_number);
    const DescriptorPool& pool = *DescriptorPool::generated_pool();
    const Descriptor* type = pool.FindMessageTypeByName(type_name);
    if (type == nullptr) {
      Error(grpc::StatusCode::NOT_FOUND, absl::StrCat("Type not found: ", type_name), response);
      return;
    }
    const FieldDescriptor* found = pool.FindExtensionByNumber(type, number);
    SendFiles(found == nullptr ? nullptr : found->file(),
              absl::StrCat("Extension not found: ", number, " of ", type_name), response);
  }

  void ExtensionNumbers(const std::string& type_name, Message& response) {
    const DescriptorPool& pool = *DescriptorPool::generated_pool();
    const Descriptor* type = pool.FindMessageTypeByName(type_name);
    if (type == nullptr) {
      Error(grpc::StatusCode::NOT_FOUND, absl::StrCat("Type not found: ", type_name), response);
      return;
    }
    std::vector<const FieldDescriptor*> extensions;
    pool.FindAllExtensions(type, &extensions);
    std::vector<int32_t> numbers;
    for (const FieldDescriptor* extension : extensions) numbers.push_back(extension->number());
    std::sort(numbers.begin(), numbers.end());
    Message* answer =
        response.GetReflection()->MutableMessage(&response, s_.all_extension_numbers_response);
    const Reflection& out = *answer->GetReflection();
    out.SetString(answer, s_.base_type_name, type->full_name());
    for (const int32_t number : numbers) out.AddInt32(answer, s_.extension_numbers, number);
  }

  void Error(grpc::StatusCode code, const std::string& message, Message& response) {
    Message* error = response.GetReflection()->MutableMessage(&response, s_.error_response);
    error->GetReflection()->SetInt32(error, s_.error_code, static_cast<int32_t>(code));
    error->GetReflection()->SetString(error, s_.error_message, message);
  }

  const Schema& s_;
  const std::vector<std::string>& services_;
  absl::flat_hash_set<std::string> sent_files_;
};

// A stream that ends at once with `status` (unknown methods, no schema).
class FinishedReactor final : public grpc::ServerGenericBidiReactor {
 public:
  explicit FinishedReactor(grpc::Status status) { Finish(std::move(status)); }
  void OnDone() override { delete this; }
};

// One ServerReflectionInfo stream: read a request, write its answer, read the
// next. Only one read or write is in flight at a time, so the reactions run
// one after another and need no lock; OnCancel touches nothing (the pending
// read or write then fails, which finishes the stream).
class ReflectionReactor final : public grpc::ServerGenericBidiReactor {
 public:
  ReflectionReactor(const Schema& schema, const std::vector<std::string>& services)
      : schema_(schema), answerer_(schema, services) {
    StartRead(&request_bytes_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {  // The client closed its side (or the call is gone).
      Finish(grpc::Status::OK);
      return;
    }
    std::unique_ptr<Message> request(schema_.request_prototype->New());
    if (!Serializer::Deserialize(&request_bytes_, request.get()).ok()) {
      Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          "not a grpc.reflection.v1alpha.ServerReflectionRequest"));
      return;
    }
    std::unique_ptr<Message> response(schema_.response_prototype->New());
    answerer_.Answer(*request, *response);
    bool own_buffer = false;
    response_bytes_.Clear();  // The serializer wants an empty buffer; the last write is done.
    const grpc::Status serialized = Serializer::Serialize(*response, &response_bytes_, &own_buffer);
    if (!serialized.ok()) {
      Finish(serialized);
      return;
    }
    StartWrite(&response_bytes_);
  }

  void OnWriteDone(bool ok) override {
    if (!ok) {
      Finish(grpc::Status(grpc::StatusCode::CANCELLED, "the response could not be sent"));
      return;
    }
    StartRead(&request_bytes_);
  }

  void OnCancel() override {}
  void OnDone() override { delete this; }

 private:
  const Schema& schema_;
  Answerer answerer_;
  grpc::ByteBuffer request_bytes_;
  grpc::ByteBuffer response_bytes_;  // Must live until OnWriteDone.
};

std::vector<std::string> WithReflection(std::vector<std::string> services) {
  if (std::find(services.begin(), services.end(), kReflectionService) == services.end()) {
    services.push_back(kReflectionService);
  }
  return services;
}

// Drops the plugins named `name` from a builder (see RemoveSyncReflectionPlugin).
class WithoutPlugin final : public grpc::ServerBuilderOption {
 public:
  explicit WithoutPlugin(std::string name) : name_(std::move(name)) {}
  void UpdateArguments(grpc::ChannelArguments* /*args*/) override {}
  void UpdatePlugins(std::vector<std::unique_ptr<grpc::ServerBuilderPlugin>>* plugins) override {
    plugins->erase(std::remove_if(plugins->begin(), plugins->end(),
                                  [this](const std::unique_ptr<grpc::ServerBuilderPlugin>& plugin) {
                                    return plugin->name() == name_;
                                  }),
                   plugins->end());
  }

 private:
  const std::string name_;
};

}  // namespace

ReflectionService::ReflectionService(std::vector<std::string> services)
    : services_(WithReflection(std::move(services))) {
  // Resolved now rather than on the first call, so a broken link shows at start.
  const absl::StatusOr<Schema>& schema = GetSchema();
  if (!schema.ok()) {
    LogError("reflection", "server reflection disabled: ", schema.status().message());
  }
}

grpc::ServerGenericBidiReactor* ReflectionService::CreateReactor(
    grpc::GenericCallbackServerContext* context) {
  if (context->method() != kReflectionMethod) {
    return new FinishedReactor(grpc::Status(grpc::StatusCode::UNIMPLEMENTED,
                                            absl::StrCat("unknown method ", context->method())));
  }
  const absl::StatusOr<Schema>& schema = GetSchema();
  if (!schema.ok()) {
    return new FinishedReactor(
        grpc::Status(grpc::StatusCode::INTERNAL, std::string(schema.status().message())));
  }
  return new ReflectionReactor(*schema, services_);
}

void RemoveSyncReflectionPlugin(grpc::ServerBuilder& builder) {
  builder.SetOption(std::make_unique<WithoutPlugin>(kSyncReflectionPlugin));
}

}  // namespace ferry
