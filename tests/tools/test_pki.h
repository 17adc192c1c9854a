// MakeTestPki: a throwaway PKI for TLS tests, made at test time with the
// openssl CLI (Debian's `openssl` package) so that nothing checked in can
// expire. Shared by the tests of ferry's TLS credentials
// (server/workers/tls_credentials_test.cc), the C++ SDK's TLS
// (clients/cpp/worker_tls_test.cc) and TLS end to end (tests/e2e/tls_test.cc).
//
// Threading: MakeTestPki runs openssl as child processes and blocks until
// they exit; call it (and use TestPkiSuite) from the test's thread, once per
// directory at a time.
#ifndef FERRY_TESTS_TOOLS_TEST_PKI_H_
#define FERRY_TESTS_TOOLS_TEST_PKI_H_

#include <string>

#include "absl/status/statusor.h"
#include "gtest/gtest.h"

namespace ferry::testing {

// Paths of PEM files: a CA (certificate and key), a server certificate for
// 127.0.0.1 and localhost and a client certificate, both signed by the CA
// and valid for 2 days, with their keys; and `stray_key`, a key that belongs
// to no certificate.
struct TestPki {
  std::string ca_crt, ca_key, server_crt, server_key, client_crt, client_key, stray_key;
};

// Makes the PKI in `dir` (created if missing; openssl's output goes to
// `dir`/openssl.log). FailedPrecondition when the openssl CLI is missing;
// Internal, with the command and openssl's output, when a step fails.
absl::StatusOr<TestPki> MakeTestPki(const std::string& dir);

// A gtest fixture whose tests share one TestPki, `pki_`, made in
// $TEST_TMPDIR/pki before the suite's first test; if that fails, every test
// of the suite fails saying why.
class TestPkiSuite : public ::testing::Test {
 protected:
  static void SetUpTestSuite();
  static void TearDownTestSuite();
  void SetUp() override;

  static TestPki* pki_;
};

}  // namespace ferry::testing

#endif  // FERRY_TESTS_TOOLS_TEST_PKI_H_
