// ReflectionService over real gRPC on loopback: a server with nothing but
// the reflection service (and RemoveSyncReflectionPlugin, so gRPC's own
// reflection plugin cannot answer in its place), and a raw client that
// speaks ServerReflectionInfo with the messages libgrpc++_reflection
// registers in the generated pool. The content served is whatever generated
// protos the test links: ferry.v1's control.proto, and libprotobuf's
// well-known types, whose api.proto has transitive dependencies.
#include "server/reflection_service.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/descriptor.pb.h>
#include <google/protobuf/message.h>
#include <google/protobuf/reflection.h>
#include <google/protobuf/text_format.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "ferry/v1/control.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ferry {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::FileDescriptorProto;
using google::protobuf::Message;
using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::UnorderedElementsAre;

constexpr char kInfoMethod[] = "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo";

std::unique_ptr<Message> NewMessage(const std::string& type) {
  const google::protobuf::Descriptor* descriptor =
      google::protobuf::DescriptorPool::generated_pool()->FindMessageTypeByName(type);
  if (descriptor == nullptr) return nullptr;
  return std::unique_ptr<Message>(
      google::protobuf::MessageFactory::generated_factory()->GetPrototype(descriptor)->New());
}

// A serialized ServerReflectionRequest from its text format.
std::string Request(const std::string& text) {
  std::unique_ptr<Message> request = NewMessage("grpc.reflection.v1alpha.ServerReflectionRequest");
  if (request == nullptr || !google::protobuf::TextFormat::ParseFromString(text, request.get())) {
    ADD_FAILURE() << "cannot build the request " << text;
    return "";
  }
  return request->SerializeAsString();
}

grpc::ByteBuffer ToBuffer(const std::string& bytes) {
  grpc::Slice slice(bytes);
  return grpc::ByteBuffer(&slice, 1);
}

std::string FromBuffer(const grpc::ByteBuffer& buffer) {
  std::vector<grpc::Slice> slices;
  EXPECT_TRUE(buffer.Dump(&slices).ok());
  std::string bytes;
  for (const grpc::Slice& slice : slices) {
    bytes.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
  }
  return bytes;
}

// A ServerReflectionResponse, decoded into plain fields.
struct Answer {
  std::string valid_host;
  std::string original_request;  // Serialized.
  std::string kind;              // The message_response member set ("" when none).
  std::vector<std::string> file_names;
  std::vector<FileDescriptorProto> files;
  std::vector<std::string> services;
  std::string base_type_name;
  std::vector<int> extension_numbers;
  int error_code = -1;
  std::string error_message;
};

// `message`'s sub-message `field`.
const Message& Sub(const Message& message, const std::string& field) {
  return message.GetReflection()->GetMessage(message,
                                             message.GetDescriptor()->FindFieldByName(field));
}
std::string Str(const Message& message, const std::string& field) {
  return message.GetReflection()->GetString(message,
                                            message.GetDescriptor()->FindFieldByName(field));
}

Answer Decode(const std::string& bytes) {
  Answer answer;
  std::unique_ptr<Message> response =
      NewMessage("grpc.reflection.v1alpha.ServerReflectionResponse");
  if (response == nullptr || !response->ParseFromString(bytes)) {
    ADD_FAILURE() << "not a ServerReflectionResponse";
    return answer;
  }
  const Message& r = *response;
  answer.valid_host = Str(r, "valid_host");
  answer.original_request = Sub(r, "original_request").SerializeAsString();
  const FieldDescriptor* kind = r.GetReflection()->GetOneofFieldDescriptor(
      r, r.GetDescriptor()->FindOneofByName("message_response"));
  if (kind == nullptr) return answer;
  answer.kind = kind->name();
  const Message& body = r.GetReflection()->GetMessage(r, kind);
  const google::protobuf::Reflection& in = *body.GetReflection();
  auto field = [&body](const char* name) { return body.GetDescriptor()->FindFieldByName(name); };
  if (answer.kind == "file_descriptor_response") {
    for (const std::string& file :
         in.GetRepeatedFieldRef<std::string>(body, field("file_descriptor_proto"))) {
      FileDescriptorProto proto;
      EXPECT_TRUE(proto.ParseFromString(file));
      answer.file_names.push_back(proto.name());
      answer.files.push_back(proto);
    }
  } else if (answer.kind == "list_services_response") {
    for (const Message& service : in.GetRepeatedFieldRef<Message>(body, field("service"))) {
      answer.services.push_back(Str(service, "name"));
    }
  } else if (answer.kind == "all_extension_numbers_response") {
    answer.base_type_name = in.GetString(body, field("base_type_name"));
    for (const int32_t number : in.GetRepeatedFieldRef<int32_t>(body, field("extension_number"))) {
      answer.extension_numbers.push_back(number);
    }
  } else if (answer.kind == "error_response") {
    answer.error_code = in.GetInt32(body, field("error_code"));
    answer.error_message = in.GetString(body, field("error_message"));
  }
  return answer;
}

// One bidi stream through grpc::GenericStub's async API, one operation at a
// time; every call is bounded by a 10 s deadline.
class Stream {
 public:
  Stream(grpc::GenericStub& stub, const std::string& method) {
    context_.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    call_ = stub.PrepareCall(&context_, method, &queue_);
    call_->StartCall(this);
    EXPECT_TRUE(Await());
  }
  ~Stream() {
    if (!finished_) {
      context_.TryCancel();
      Close();
    }
    queue_.Shutdown();
    void* tag;
    bool ok;
    while (queue_.Next(&tag, &ok)) {
    }
  }

  bool Write(const std::string& bytes) {
    call_->Write(ToBuffer(bytes), this);
    return Await();
  }
  std::optional<std::string> Read() {
    grpc::ByteBuffer buffer;
    call_->Read(&buffer, this);
    if (!Await()) return std::nullopt;
    return FromBuffer(buffer);
  }
  // Sends `request` (text format) and decodes the response.
  Answer Ask(const std::string& request) {
    EXPECT_TRUE(Write(Request(request))) << request;
    std::optional<std::string> response = Read();
    EXPECT_TRUE(response.has_value()) << request;
    return Decode(response.value_or(""));
  }
  // Half-closes and returns the call's status.
  grpc::Status Close() {
    call_->WritesDone(this);
    Await();
    grpc::Status status;
    call_->Finish(&status, this);
    Await();
    finished_ = true;
    return status;
  }

 private:
  bool Await() {
    void* tag = nullptr;
    bool ok = false;
    EXPECT_TRUE(queue_.Next(&tag, &ok));
    return ok;
  }

  grpc::CompletionQueue queue_;
  grpc::ClientContext context_;
  std::unique_ptr<grpc::GenericClientAsyncReaderWriter> call_;
  bool finished_ = false;
};

class ReflectionServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // A call into control.pb.cc keeps it linked, and ferry.v1's descriptors
    // in the generated pool.
    ASSERT_EQ(v1::PartitionRef::descriptor()->file()->name(), "ferry/v1/control.proto");
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterCallbackGenericService(&service_);
    RemoveSyncReflectionPlugin(builder);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    ASSERT_NE(port, 0);
    stub_ = std::make_unique<grpc::GenericStub>(grpc::CreateChannel(
        absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials()));
  }
  void TearDown() override {
    if (server_ != nullptr) server_->Shutdown();
  }

  ReflectionService service_{{"ferry.v1.Control", "grpc.health.v1.Health"}};
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<grpc::GenericStub> stub_;
};

TEST_F(ReflectionServiceTest, ListServicesNamesTheGivenServicesAndReflection) {
  Stream stream(*stub_, kInfoMethod);
  const std::string request = R"pb(host: "ferry.test" list_services: "*")pb";
  const Answer answer = stream.Ask(request);
  EXPECT_EQ(answer.kind, "list_services_response");
  EXPECT_THAT(answer.services, ElementsAre("ferry.v1.Control", "grpc.health.v1.Health",
                                           "grpc.reflection.v1alpha.ServerReflection"));
  EXPECT_EQ(answer.valid_host, "ferry.test");
  EXPECT_EQ(answer.original_request, Request(request));
  EXPECT_TRUE(stream.Close().ok());
}

TEST_F(ReflectionServiceTest, FileContainingSymbolSendsTheDefiningFile) {
  Stream stream(*stub_, kInfoMethod);
  const Answer answer = stream.Ask(R"pb(file_containing_symbol: "ferry.v1.Control")pb");
  ASSERT_THAT(answer.file_names, ElementsAre("ferry/v1/control.proto"));
  EXPECT_EQ(answer.files[0].package(), "ferry.v1");
  ASSERT_EQ(answer.files[0].service_size(), 1);
  EXPECT_EQ(answer.files[0].service(0).name(), "Control");
  // A method and a message are symbols of the same file (already sent, and
  // sent again: the file asked for always comes back).
  EXPECT_THAT(stream.Ask(R"pb(file_containing_symbol: "ferry.v1.Control.GetStatus")pb").file_names,
              ElementsAre("ferry/v1/control.proto"));
  EXPECT_THAT(stream.Ask(R"pb(file_containing_symbol: "ferry.v1.PartitionRef")pb").file_names,
              ElementsAre("ferry/v1/control.proto"));
  EXPECT_TRUE(stream.Close().ok());
}

TEST_F(ReflectionServiceTest, FileContainingSymbolSendsTransitiveDependenciesAfterTheFile) {
  Stream stream(*stub_, kInfoMethod);
  // api.proto imports source_context.proto and type.proto; type.proto imports
  // any.proto and source_context.proto.
  const Answer answer = stream.Ask(R"pb(file_containing_symbol: "google.protobuf.Api")pb");
  ASSERT_FALSE(answer.file_names.empty());
  EXPECT_EQ(answer.file_names[0], "google/protobuf/api.proto");
  EXPECT_THAT(answer.file_names,
              UnorderedElementsAre("google/protobuf/api.proto", "google/protobuf/type.proto",
                                   "google/protobuf/source_context.proto",
                                   "google/protobuf/any.proto"));
  EXPECT_TRUE(stream.Close().ok());
}

TEST_F(ReflectionServiceTest, SameStreamSkipsFilesAlreadySent) {
  Stream stream(*stub_, kInfoMethod);
  EXPECT_EQ(stream.Ask(R"pb(file_containing_symbol: "google.protobuf.Api")pb").file_names.size(),
            4u);
  EXPECT_THAT(stream.Ask(R"pb(file_containing_symbol: "google.protobuf.Type")pb").file_names,
              ElementsAre("google/protobuf/type.proto"));
  EXPECT_THAT(stream.Ask(R"pb(file_by_filename: "google/protobuf/any.proto")pb").file_names,
              ElementsAre("google/protobuf/any.proto"));
  EXPECT_TRUE(stream.Close().ok());

  // A new stream starts from nothing sent.
  Stream other(*stub_, kInfoMethod);
  EXPECT_THAT(other.Ask(R"pb(file_containing_symbol: "google.protobuf.Type")pb").file_names,
              UnorderedElementsAre("google/protobuf/type.proto", "google/protobuf/any.proto",
                                   "google/protobuf/source_context.proto"));
  EXPECT_TRUE(other.Close().ok());
}

TEST_F(ReflectionServiceTest, UnknownSymbolIsNotFoundAndTheStreamGoesOn) {
  Stream stream(*stub_, kInfoMethod);
  const std::string request = R"pb(file_containing_symbol: "nope.Nope")pb";
  const Answer answer = stream.Ask(request);
  EXPECT_EQ(answer.kind, "error_response");
  EXPECT_EQ(answer.error_code, static_cast<int>(grpc::StatusCode::NOT_FOUND));
  EXPECT_EQ(answer.error_message, "Symbol not found: nope.Nope");
  EXPECT_EQ(answer.original_request, Request(request));
  EXPECT_THAT(stream.Ask(R"pb(file_containing_symbol: "ferry.v1.Control")pb").file_names,
              ElementsAre("ferry/v1/control.proto"));
  EXPECT_TRUE(stream.Close().ok());
}

TEST_F(ReflectionServiceTest, FileByFilename) {
  Stream stream(*stub_, kInfoMethod);
  EXPECT_THAT(stream.Ask(R"pb(file_by_filename: "ferry/v1/control.proto")pb").file_names,
              ElementsAre("ferry/v1/control.proto"));
  const Answer missing = stream.Ask(R"pb(file_by_filename: "nope/nope.proto")pb");
  EXPECT_EQ(missing.error_code, static_cast<int>(grpc::StatusCode::NOT_FOUND));
  EXPECT_EQ(missing.error_message, "File not found: nope/nope.proto");
  EXPECT_TRUE(stream.Close().ok());
}

// No linked proto declares an extension: the answers for a known type
// without extensions, and the not-found errors.
TEST_F(ReflectionServiceTest, Extensions) {
  Stream stream(*stub_, kInfoMethod);
  const Answer numbers =
      stream.Ask(R"pb(all_extension_numbers_of_type: "google.protobuf.FieldOptions")pb");
  EXPECT_EQ(numbers.kind, "all_extension_numbers_response");
  EXPECT_EQ(numbers.base_type_name, "google.protobuf.FieldOptions");
  EXPECT_THAT(numbers.extension_numbers, IsEmpty());

  const Answer no_type = stream.Ask(R"pb(all_extension_numbers_of_type: "nope.Nope")pb");
  EXPECT_EQ(no_type.error_code, static_cast<int>(grpc::StatusCode::NOT_FOUND));
  EXPECT_EQ(no_type.error_message, "Type not found: nope.Nope");

  const Answer no_extension = stream.Ask(
      R"pb(file_containing_extension { containing_type: "google.protobuf.FieldOptions"
                                       extension_number: 54321 })pb");
  EXPECT_EQ(no_extension.error_code, static_cast<int>(grpc::StatusCode::NOT_FOUND));
  EXPECT_THAT(no_extension.error_message, ::testing::StartsWith("Extension not found"));

  const Answer no_container = stream.Ask(
      R"pb(file_containing_extension { containing_type: "nope.Nope" extension_number: 1 })pb");
  EXPECT_EQ(no_container.error_code, static_cast<int>(grpc::StatusCode::NOT_FOUND));
  EXPECT_EQ(no_container.error_message, "Type not found: nope.Nope");
  EXPECT_TRUE(stream.Close().ok());
}

TEST_F(ReflectionServiceTest, RequestWithoutQuestionIsInvalidArgument) {
  Stream stream(*stub_, kInfoMethod);
  const Answer answer = stream.Ask(R"pb(host: "h")pb");
  EXPECT_EQ(answer.kind, "error_response");
  EXPECT_EQ(answer.error_code, static_cast<int>(grpc::StatusCode::INVALID_ARGUMENT));
  EXPECT_EQ(answer.valid_host, "h");
  EXPECT_TRUE(stream.Close().ok());
}

TEST_F(ReflectionServiceTest, UnknownMethodIsUnimplemented) {
  for (const std::string method :
       {"/nope.Nope/Nope", "/grpc.reflection.v1alpha.ServerReflection/Nope"}) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    const grpc::ByteBuffer request = ToBuffer("x");
    grpc::ByteBuffer response;
    std::promise<grpc::Status> done;
    stub_->UnaryCall(&context, method, grpc::StubOptions(), &request, &response,
                     [&done](grpc::Status status) { done.set_value(std::move(status)); });
    EXPECT_EQ(done.get_future().get().error_code(), grpc::StatusCode::UNIMPLEMENTED) << method;
  }
}

TEST_F(ReflectionServiceTest, UnparsableRequestEndsTheStreamWithInvalidArgument) {
  Stream stream(*stub_, kInfoMethod);
  // A varint longer than ten bytes: no protobuf parses it.
  ASSERT_TRUE(stream.Write(std::string(12, '\xff')));
  EXPECT_FALSE(stream.Read().has_value());
  EXPECT_EQ(stream.Close().error_code(), grpc::StatusCode::INVALID_ARGUMENT);
}

}  // namespace
}  // namespace ferry
