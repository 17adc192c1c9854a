#include "server/version.h"

#include <google/protobuf/stubs/common.h>
#include <grpcpp/grpcpp.h>
#include <librdkafka/rdkafka.h>

#include "absl/base/config.h"
#include "absl/strings/str_cat.h"

namespace ferry {

std::string BuildMode() {
#ifdef NDEBUG
  return "release build";
#else
  return "debug build, NDEBUG not defined";
#endif
}

std::string VersionText() {
  // The libraries' versions are the ones linked at run time where the
  // library can say (librdkafka, gRPC), else the headers' (protobuf, abseil).
  std::string text = absl::StrCat("ferry ", kFerryVersion, " (", BuildMode(), ")\n",
                                  "librdkafka ", rd_kafka_version_str(), "\n",
                                  "gRPC ", grpc::Version(), "\n",
                                  "protobuf ",
                                  google::protobuf::internal::VersionString(GOOGLE_PROTOBUF_VERSION),
                                  "\n");
#ifdef ABSL_LTS_RELEASE_VERSION
  absl::StrAppend(&text, "abseil ", ABSL_LTS_RELEASE_VERSION, "\n");
#else
  absl::StrAppend(&text, "abseil (not an LTS release)\n");
#endif
  return text;
}

}  // namespace ferry
