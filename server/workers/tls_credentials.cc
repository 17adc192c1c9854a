#include "server/workers/tls_credentials.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/common/pem_file.h"

namespace ferry {
namespace {

struct PemFile {
  std::string key;  // the full config key, e.g. "server.tls.cert_file"
  std::string path;
  std::string contents;
};

absl::StatusOr<PemFile> ReadPem(const std::string& key_path, const std::string& field,
                                const std::string& path) {
  PemFile file{absl::StrCat(key_path, ".", field), path, ""};
  absl::StatusOr<std::string> contents = ReadPemFile(file.key, path);
  if (!contents.ok()) return contents.status();
  file.contents = *std::move(contents);
  return file;
}

// Never prompts on the terminal for an encrypted key's passphrase (OpenSSL's
// default): ferry cannot answer one, so an encrypted key is an error.
int NoPassphrase(char* /*buffer*/, int /*size*/, int /*rwflag*/, void* /*user*/) { return -1; }

// OpenSSL's reason for the last failure, and an empty error queue: a stale
// error left on this thread would be mistaken for gRPC's own later.
std::string TakeOpenSslError() {
  const unsigned long code = ERR_peek_last_error();
  std::string reason;
  if (code != 0) {
    const char* text = ERR_reason_error_string(code);
    if (text != nullptr) reason = absl::StrCat(" (", text, ")");
  }
  ERR_clear_error();
  return reason;
}

using Bio = std::unique_ptr<BIO, decltype(&BIO_free)>;
using X509Ptr = std::unique_ptr<X509, decltype(&X509_free)>;
using KeyPtr = std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)>;

Bio MemoryBio(const std::string& contents) {
  return Bio(BIO_new_mem_buf(contents.data(), static_cast<int>(contents.size())), &BIO_free);
}

// Every certificate in the file (at least one), leaf first.
absl::StatusOr<std::vector<X509Ptr>> ParseCertificates(const PemFile& file) {
  Bio bio = MemoryBio(file.contents);
  std::vector<X509Ptr> certificates;
  while (X509* certificate = PEM_read_bio_X509(bio.get(), nullptr, NoPassphrase, nullptr)) {
    certificates.emplace_back(certificate, &X509_free);
  }
  // Reading past the last certificate always leaves "no start line" behind.
  const std::string reason = TakeOpenSslError();
  if (certificates.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        file.key, ": ", file.path, " holds no PEM certificate (-----BEGIN CERTIFICATE-----)",
        reason));
  }
  return certificates;
}

absl::StatusOr<KeyPtr> ParsePrivateKey(const PemFile& file) {
  Bio bio = MemoryBio(file.contents);
  KeyPtr key(PEM_read_bio_PrivateKey(bio.get(), nullptr, NoPassphrase, nullptr),
             &EVP_PKEY_free);
  const std::string reason = TakeOpenSslError();
  if (key == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(file.key, ": ", file.path,
                     " holds no unencrypted PEM private key", reason));
  }
  return key;
}

// The certificate chain and its private key, checked to belong together
// (a mismatch would otherwise fail every handshake, far from its cause).
absl::StatusOr<std::pair<PemFile, PemFile>> ReadKeyPair(const TlsFiles& tls,
                                                        const std::string& key_path) {
  if (tls.cert_file.empty() != tls.key_file.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(key_path, ": cert_file and key_file go together; set both (PEM files)"));
  }
  absl::StatusOr<PemFile> cert = ReadPem(key_path, "cert_file", tls.cert_file);
  if (!cert.ok()) return cert.status();
  absl::StatusOr<PemFile> key = ReadPem(key_path, "key_file", tls.key_file);
  if (!key.ok()) return key.status();
  absl::StatusOr<std::vector<X509Ptr>> chain = ParseCertificates(*cert);
  if (!chain.ok()) return chain.status();
  absl::StatusOr<KeyPtr> private_key = ParsePrivateKey(*key);
  if (!private_key.ok()) return private_key.status();
  const bool matches = X509_check_private_key(chain->front().get(), private_key->get()) == 1;
  TakeOpenSslError();
  if (!matches) {
    return absl::InvalidArgumentError(absl::StrCat(key->key, ": ", key->path,
                                                   " is not the private key of the certificate in ",
                                                   cert->key, " ", cert->path));
  }
  return std::make_pair(*std::move(cert), *std::move(key));
}

absl::StatusOr<PemFile> ReadCa(const std::string& key_path, const std::string& field,
                               const std::string& path) {
  absl::StatusOr<PemFile> ca = ReadPem(key_path, field, path);
  if (!ca.ok()) return ca.status();
  absl::StatusOr<std::vector<X509Ptr>> certificates = ParseCertificates(*ca);
  if (!certificates.ok()) return certificates.status();
  return ca;
}

}  // namespace

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> ServerCredentialsFor(
    const TlsFiles& tls, const std::string& key_path) {
  if (!tls.enabled) return grpc::InsecureServerCredentials();
  if (tls.cert_file.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(key_path, ".cert_file: missing; a TLS server needs cert_file and key_file"));
  }
  absl::StatusOr<std::pair<PemFile, PemFile>> pair = ReadKeyPair(tls, key_path);
  if (!pair.ok()) return pair.status();
  grpc::SslServerCredentialsOptions options(GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  options.pem_key_cert_pairs.push_back({pair->second.contents, pair->first.contents});
  if (!tls.ca_file.empty()) {
    // The server side names it client_ca_file in the config.
    absl::StatusOr<PemFile> ca = ReadCa(key_path, "client_ca_file", tls.ca_file);
    if (!ca.ok()) return ca.status();
    options.pem_root_certs = ca->contents;
    options.client_certificate_request =
        GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY;
  }
  return grpc::SslServerCredentials(options);
}

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> ChannelCredentialsFor(
    const TlsFiles& tls, const std::string& key_path) {
  if (!tls.enabled) return grpc::InsecureChannelCredentials();
  grpc::SslCredentialsOptions options;
  if (!tls.ca_file.empty()) {
    absl::StatusOr<PemFile> ca = ReadCa(key_path, "ca_file", tls.ca_file);
    if (!ca.ok()) return ca.status();
    options.pem_root_certs = ca->contents;
  }
  // Empty pem_root_certs: gRPC uses the system roots.
  if (!tls.cert_file.empty() || !tls.key_file.empty()) {
    absl::StatusOr<std::pair<PemFile, PemFile>> pair = ReadKeyPair(tls, key_path);
    if (!pair.ok()) return pair.status();
    options.pem_cert_chain = pair->first.contents;
    options.pem_private_key = pair->second.contents;
  }
  std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::SslCredentials(options);
  if (credentials == nullptr) {
    return absl::InternalError(absl::StrCat(key_path, ": gRPC refused the TLS credentials"));
  }
  return credentials;
}

void AddTlsChannelArguments(const TlsFiles& tls, grpc::ChannelArguments* arguments) {
  if (tls.enabled && !tls.server_name.empty()) {
    arguments->SetSslTargetNameOverride(tls.server_name);
  }
}

std::string DescribeChannelTls(const TlsFiles& tls) {
  if (!tls.enabled) return "plaintext";
  std::string description = tls.cert_file.empty() ? "TLS" : "mTLS";
  absl::StrAppend(&description, ", CA ", tls.ca_file.empty() ? "system roots" : tls.ca_file);
  if (!tls.server_name.empty()) absl::StrAppend(&description, ", server name ", tls.server_name);
  return description;
}

}  // namespace ferry
