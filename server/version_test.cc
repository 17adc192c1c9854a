#include "server/version.h"

#include <google/protobuf/stubs/common.h>
#include <grpcpp/grpcpp.h>
#include <librdkafka/rdkafka.h>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ferry {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

TEST(VersionTest, NamesFerryAndEveryMainLibrary) {
  const std::string text = VersionText();
  EXPECT_THAT(text, StartsWith(absl::StrCat("ferry ", kFerryVersion, " (")));
  EXPECT_THAT(text, HasSubstr(absl::StrCat("\nlibrdkafka ", rd_kafka_version_str(), "\n")));
  EXPECT_THAT(text, HasSubstr(absl::StrCat("\ngRPC ", grpc::Version(), "\n")));
  EXPECT_THAT(text, HasSubstr(absl::StrCat(
                        "\nprotobuf ",
                        google::protobuf::internal::VersionString(GOOGLE_PROTOBUF_VERSION), "\n")));
  EXPECT_THAT(text, HasSubstr(absl::StrCat("\nabseil ", ABSL_LTS_RELEASE_VERSION, "\n")));
}

// ferry links the pinned librdkafka statically (tools/build_librdkafka): the
// library that runs is the one the headers describe, not Debian's librdkafka1
// (same soname, 2.0.2), and is new enough for kafka.group.protocol: consumer
// (KIP-848, generally available since librdkafka 2.12).
TEST(VersionTest, RunsThePinnedLibrdkafkaItWasCompiledAgainst) {
  EXPECT_EQ(rd_kafka_version(), RD_KAFKA_VERSION);
  EXPECT_GE(rd_kafka_version(), 0x020c0000) << rd_kafka_version_str();
}

}  // namespace
}  // namespace ferry
