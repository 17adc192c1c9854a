// FloorSink (bench/floor_sink.h): Ready with the configured credit, one
// Results per Events message with every id answered OK, and the credit back
// in Results.credit or as a Credit message depending on the client's header.
#include "bench/floor_sink.h"

#include <memory>
#include <vector>

#include "gtest/gtest.h"

namespace ferry::bench {
namespace {

using ferry::v1::ProcessRequest;
using ferry::v1::ProcessResponse;

class FloorSinkTest : public ::testing::Test {
 protected:
  void SetUp() override {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    builder.RegisterService(&sink_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    stub_ = ferry::v1::Processor::NewStub(grpc::CreateChannel(
        "ipv4:127.0.0.1:" + std::to_string(port_), grpc::InsecureChannelCredentials()));
  }
  void TearDown() override { server_->Shutdown(); }

  static ProcessRequest EventsWithIds(const std::vector<uint64_t>& ids) {
    ProcessRequest request;
    for (uint64_t id : ids) request.mutable_events()->add_events()->set_id(id);
    return request;
  }

  FloorSink sink_{7};
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<ferry::v1::Processor::Stub> stub_;
};

TEST_F(FloorSinkTest, ResultsCarryTheCreditWhenTheClientAsks) {
  grpc::ClientContext context;
  context.AddMetadata(kResultsCreditHeader, "1");
  auto stream = stub_->Process(&context);
  ProcessResponse response;
  ASSERT_TRUE(stream->Read(&response));
  ASSERT_TRUE(response.has_ready());
  EXPECT_EQ(response.ready().max_in_flight(), 7u);

  ProcessRequest cancel;
  cancel.mutable_cancel()->add_ids(99);
  ASSERT_TRUE(stream->Write(cancel));  // ignored: no answer for it
  ASSERT_TRUE(stream->Write(EventsWithIds({11, 12, 13})));
  ASSERT_TRUE(stream->Read(&response));
  ASSERT_TRUE(response.has_results());
  ASSERT_EQ(response.results().results_size(), 3);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(response.results().results(i).id(), static_cast<uint64_t>(11 + i));
    EXPECT_EQ(response.results().results(i).status(), ferry::v1::Result::OK);
  }
  EXPECT_EQ(response.results().credit(), 3u);

  ASSERT_TRUE(stream->Write(EventsWithIds({14})));
  ASSERT_TRUE(stream->Read(&response));
  ASSERT_EQ(response.results().results_size(), 1);  // not the 3 of before
  EXPECT_EQ(response.results().results(0).id(), 14u);
  EXPECT_EQ(response.results().credit(), 1u);
  stream->WritesDone();
  EXPECT_FALSE(stream->Read(&response));
  EXPECT_TRUE(stream->Finish().ok());
}

TEST_F(FloorSinkTest, CreditMessageFollowsWithoutTheHeader) {
  grpc::ClientContext context;
  auto stream = stub_->Process(&context);
  ProcessResponse response;
  ASSERT_TRUE(stream->Read(&response));
  ASSERT_TRUE(response.has_ready());
  ASSERT_TRUE(stream->Write(EventsWithIds({1, 2})));
  ASSERT_TRUE(stream->Read(&response));
  ASSERT_TRUE(response.has_results());
  EXPECT_EQ(response.results().results_size(), 2);
  EXPECT_EQ(response.results().credit(), 0u);
  ASSERT_TRUE(stream->Read(&response));
  ASSERT_TRUE(response.has_credit());
  EXPECT_EQ(response.credit().n(), 2u);
  stream->WritesDone();
  EXPECT_FALSE(stream->Read(&response));
  EXPECT_TRUE(stream->Finish().ok());
}

}  // namespace
}  // namespace ferry::bench
