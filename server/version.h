// ferry's version, defined here and nowhere else, and the text of
// `ferry --version`: ferry's version and build mode, then the versions of the
// libraries that decide its behaviour on the wire (librdkafka, gRPC,
// protobuf, abseil), so a bug report can say exactly what ran.
//
// Threading: pure functions.
#ifndef FERRY_SERVER_VERSION_H_
#define FERRY_SERVER_VERSION_H_

#include <string>

namespace ferry {

inline constexpr char kFerryVersion[] = "0.1.0";

// "release build" when built with NDEBUG (`bazel build --config=release`),
// else "debug build, NDEBUG not defined".
std::string BuildMode();

// One "name version" per line, ferry first:
//   ferry 0.1.0 (release build)
//   librdkafka 2.15.1
//   gRPC 1.51.1
//   protobuf 3.21.12
//   abseil 20220623
std::string VersionText();

}  // namespace ferry

#endif  // FERRY_SERVER_VERSION_H_
