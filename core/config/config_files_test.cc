#include "core/config/config_files.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/mocks/config_fixtures.h"

namespace ferry {
namespace {

using ::ferry::testing::TestTmpDir;
using ::ferry::testing::WriteTempFile;
using ::testing::StartsWith;

std::string Message(const NamedFile& file) {
  absl::Status status = CheckNamedFile(file);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << file.path;
  return std::string(status.message());
}

TEST(ConfigFilesTest, ReadableFileIsOk) {
  EXPECT_TRUE(
      CheckNamedFile({"control.token_file", WriteTempFile("token", "s3cret\n"), "f.yaml:3"}).ok());
}

TEST(ConfigFilesTest, MissingFileNamesConfigFileAndLine) {
  EXPECT_EQ(Message({"control.token_file", "/nonexistent/token", "ferry.yaml:146"}),
            "ferry.yaml:146: control.token_file: cannot read /nonexistent/token: "
            "No such file or directory");
}

TEST(ConfigFilesTest, UnreadableFileIsNamed) {
  const std::string path = WriteTempFile("unreadable", "token");
  ASSERT_EQ(chmod(path.c_str(), 0), 0);
  if (access(path.c_str(), R_OK) == 0) {
    // Running as root: permissions do not stop reads. A path through a
    // regular file fails for root too (ENOTDIR).
    EXPECT_EQ(Message({"server.tls.key_file", path + "/x", "ferry.yaml:9"}),
              absl::StrCat("ferry.yaml:9: server.tls.key_file: cannot read ", path,
                           "/x: Not a directory"));
  } else {
    EXPECT_EQ(Message({"server.tls.key_file", path, "ferry.yaml:9"}),
              absl::StrCat("ferry.yaml:9: server.tls.key_file: cannot read ", path,
                           ": Permission denied"));
  }
}

TEST(ConfigFilesTest, EmptyOrBlankFileIsNamed) {
  const std::string empty = WriteTempFile("empty", "");
  EXPECT_EQ(Message({"control.token_file", empty, "ferry.yaml:2"}),
            absl::StrCat("ferry.yaml:2: control.token_file: ", empty, " is empty"));
  const std::string blank = WriteTempFile("blank", " \n\t\n");
  EXPECT_EQ(Message({"control.token_file", blank, "ferry.yaml:2"}),
            absl::StrCat("ferry.yaml:2: control.token_file: ", blank, " is empty"));
}

TEST(ConfigFilesTest, DirectoryIsNamed) {
  EXPECT_EQ(Message({"processors[1].tls.ca_file", TestTmpDir(), "ferry.yaml:20"}),
            absl::StrCat("ferry.yaml:20: processors[1].tls.ca_file: cannot read ", TestTmpDir(),
                         ": Is a directory"));
}

TEST(ConfigFilesTest, OversizedFileAndEndlessDeviceAreRefused) {
  const std::string big = WriteTempFile("big.pem", std::string(kMaxNamedFileBytes + 1, 'A'));
  EXPECT_THAT(Message({"server.tls.cert_file", big, "ferry.yaml:4"}),
              StartsWith(absl::StrCat("ferry.yaml:4: server.tls.cert_file: ", big, " is over ")));
  EXPECT_THAT(Message({"server.tls.cert_file", "/dev/zero", "ferry.yaml:4"}),
              StartsWith("ferry.yaml:4: server.tls.cert_file: /dev/zero is over "));
}

TEST(ConfigFilesTest, FifoWithoutWriterDoesNotBlock) {
  const std::string fifo = absl::StrCat(TestTmpDir(), "/fifo");
  ::unlink(fifo.c_str());
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_EQ(Message({"control.token_file", fifo, "ferry.yaml:2"}),
            absl::StrCat("ferry.yaml:2: control.token_file: ", fifo, " is empty"));
}

TEST(ConfigFilesTest, WithoutLocationNamesTheSetting) {
  EXPECT_EQ(Message({"control.token_file", "/nonexistent/t", ""}),
            "control.token_file: cannot read /nonexistent/t: No such file or directory");
}

}  // namespace
}  // namespace ferry
