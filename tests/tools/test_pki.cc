#include "tests/tools/test_pki.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace ferry::testing {
namespace {

absl::Status WriteFile(const std::string& path, const std::string& contents) {
  std::ofstream out(path, std::ios::trunc);
  out << contents;
  out.close();
  if (!out) return absl::InternalError(absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream contents;
  contents << in.rdbuf();
  return contents.str();
}

// openssl's configuration: the CA's and the leaves' requests, and the
// extensions that make the leaves a server (for 127.0.0.1 and localhost) and
// a client certificate.
absl::Status WriteOpensslConfig(const std::string& dir) {
  for (const auto& [name, contents] : {
           std::pair<std::string, std::string>{
               "ca.cnf",
               "[req]\nprompt = no\ndistinguished_name = dn\nx509_extensions = ext\n"
               "[dn]\nCN = ferry test CA\n"
               "[ext]\nbasicConstraints = critical,CA:TRUE\nkeyUsage = critical,keyCertSign\n"},
           {"leaf.cnf", "[req]\nprompt = no\ndistinguished_name = dn\n[dn]\nCN = leaf\n"},
           {"server.ext",
            "basicConstraints = CA:FALSE\nextendedKeyUsage = serverAuth\n"
            "subjectAltName = IP:127.0.0.1,DNS:localhost\n"},
           {"client.ext", "basicConstraints = CA:FALSE\nextendedKeyUsage = clientAuth\n"},
       }) {
    if (absl::Status s = WriteFile(absl::StrCat(dir, "/", name), contents); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<TestPki> MakeTestPki(const std::string& dir) {
  if (std::system("command -v openssl >/dev/null 2>&1") != 0) {
    return absl::FailedPreconditionError(
        "the openssl CLI is missing: install Debian's `openssl` package");
  }
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) return absl::InternalError(absl::StrCat("cannot create ", dir, ": ", error.message()));
  if (absl::Status s = WriteOpensslConfig(dir); !s.ok()) return s;
  const std::string new_key = " -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
  for (const std::string& command : {
           "openssl req -x509 -days 2 -config ca.cnf -keyout ca.key -out ca.crt" + new_key,
           "openssl req -new -config leaf.cnf -keyout server.key -out server.csr" + new_key,
           std::string("openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -set_serial 2"
                       " -days 2 -extfile server.ext -out server.crt"),
           "openssl req -new -config leaf.cnf -keyout client.key -out client.csr" + new_key,
           std::string("openssl x509 -req -in client.csr -CA ca.crt -CAkey ca.key -set_serial 3"
                       " -days 2 -extfile client.ext -out client.crt"),
           std::string("openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:prime256v1"
                       " -out stray.key"),
       }) {
    const std::string line = absl::StrCat("cd '", dir, "' && ", command, " >>openssl.log 2>&1");
    if (std::system(line.c_str()) != 0) {
      return absl::InternalError(
          absl::StrCat("failed: ", command, "\n", ReadFile(dir + "/openssl.log")));
    }
  }
  return TestPki{dir + "/ca.crt",     dir + "/ca.key",     dir + "/server.crt", dir + "/server.key",
                 dir + "/client.crt", dir + "/client.key", dir + "/stray.key"};
}

TestPki* TestPkiSuite::pki_ = nullptr;

void TestPkiSuite::SetUpTestSuite() {
  const char* tmp = std::getenv("TEST_TMPDIR");
  absl::StatusOr<TestPki> pki = MakeTestPki(absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/pki"));
  ASSERT_TRUE(pki.ok()) << pki.status();
  pki_ = new TestPki(*std::move(pki));
}

void TestPkiSuite::TearDownTestSuite() {
  delete pki_;
  pki_ = nullptr;
}

void TestPkiSuite::SetUp() { ASSERT_NE(pki_, nullptr) << "no test PKI (see SetUpTestSuite)"; }

}  // namespace ferry::testing
