#include "core/common/pem_file.h"

#include <sys/stat.h>
#include <unistd.h>

#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/mocks/config_fixtures.h"

namespace ferry {
namespace {

using ::testing::HasSubstr;

constexpr char kPem[] =
    "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";

std::string TempPath(const std::string& name) {
  return absl::StrCat(::ferry::testing::TestTmpDir(), "/", name);
}

std::string Write(const std::string& name, const std::string& contents) {
  return ::ferry::testing::WriteTempFile(name, contents);
}

TEST(PemFileTest, ReadsAPemFileWhole) {
  const std::string path = Write("ok.pem", kPem);
  absl::StatusOr<std::string> pem = ReadPemFile("tls.cert_file", path);
  ASSERT_TRUE(pem.ok()) << pem.status();
  EXPECT_EQ(*pem, kPem);
  EXPECT_TRUE(HasPemBlock(*pem));
}

TEST(PemFileTest, MissingFileNamesTheSettingAndTheReason) {
  absl::StatusOr<std::string> pem = ReadPemFile("server.tls.key_file", "/nonexistent/tls.key");
  EXPECT_EQ(pem.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(pem.status().message(),
            "server.tls.key_file: cannot read /nonexistent/tls.key: No such file or directory");
}

TEST(PemFileTest, EmptyAndWhitespaceOnlyFilesAreEmpty) {
  for (const char* contents : {"", " \n\t\n"}) {
    const std::string path = Write("empty.pem", contents);
    absl::StatusOr<std::string> pem = ReadPemFile("--tls_ca", path);
    EXPECT_EQ(pem.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(pem.status().message(), absl::StrCat("--tls_ca: ", path, " is empty"));
  }
}

TEST(PemFileTest, HugeFileIsRefusedWithoutReadingItWhole) {
  const std::string path = Write("huge.pem", std::string(kMaxPemFileBytes + 1, 'A'));
  absl::StatusOr<std::string> pem = ReadPemFile("tls.cert_file", path);
  EXPECT_EQ(pem.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(pem.status().message(),
            absl::StrCat("tls.cert_file: ", path, " is over 1048576 bytes; not a PEM file"));
  // A device that never ends: at most limit + 1 bytes are read.
  absl::StatusOr<std::string> zero = ReadFileUpTo("/dev/zero", 100, "x");
  ASSERT_TRUE(zero.ok()) << zero.status();
  EXPECT_EQ(zero->size(), 101u);
  EXPECT_EQ(ReadPemFile("tls.ca_file", "/dev/zero").status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(PemFileTest, NotPemIsReadButHasNoPemBlock) {
  const std::string path = Write("garbage.pem", "\xff\xfe not a certificate \x80\n");
  absl::StatusOr<std::string> pem = ReadPemFile("tls.cert_file", path);
  ASSERT_TRUE(pem.ok()) << pem.status();
  EXPECT_FALSE(HasPemBlock(*pem));
  EXPECT_FALSE(HasPemBlock("-----BEGIN"));  // no space: not a block header
}

TEST(PemFileTest, DirectoryAndEmptyFifoNeverStall) {
  absl::StatusOr<std::string> dir = ReadPemFile("tls.cert_file", TempPath(""));
  EXPECT_THAT(std::string(dir.status().message()),
              HasSubstr("tls.cert_file: cannot read "));
  EXPECT_THAT(std::string(dir.status().message()), HasSubstr("Is a directory"));
  // A FIFO nobody writes to: what is there (nothing) is read, no stall.
  const std::string fifo = TempPath("pem.fifo");
  ::unlink(fifo.c_str());
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  absl::StatusOr<std::string> pem = ReadPemFile("tls.cert_file", fifo);
  EXPECT_EQ(pem.status().message(), absl::StrCat("tls.cert_file: ", fifo, " is empty"));
}

}  // namespace
}  // namespace ferry
