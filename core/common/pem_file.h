// Reading the small files that settings and flags name (PEM certificates,
// keys and CA bundles; tokens): one bounded, non-blocking reader with clear
// errors, used by ferry's TLS credentials (server/workers), the config-time
// file checks (core/config), the C++ worker SDK (clients/cpp) and ferryctl.
//
// Threading: pure functions of the file system; call them from any thread.
#ifndef FERRY_CORE_COMMON_PEM_FILE_H_
#define FERRY_CORE_COMMON_PEM_FILE_H_

#include <cstddef>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ferry {

// A PEM file bigger than this is the wrong file (or /dev/zero).
inline constexpr size_t kMaxPemFileBytes = size_t{1} << 20;

// The contents of `path`, at most `limit` + 1 bytes of them (so the caller
// can tell a file over `limit` without reading /dev/zero whole). Opened
// non-blocking, so a FIFO or device with nothing to read gives what is there
// instead of a stall; a directory is refused (EISDIR). A failure is
// absl::ErrnoToStatus(errno, failure): `<failure>: <strerror>` (NotFound for
// a missing file, PermissionDenied, ...).
absl::StatusOr<std::string> ReadFileUpTo(const std::string& path, size_t limit,
                                         absl::string_view failure);

// The PEM file `path` that `setting` names (e.g. "server.tls.cert_file",
// "--tls_ca"), whole. Errors start with the setting:
//   `<setting>: cannot read <path>: <strerror>` (the errno's status code),
//   `<setting>: <path> is empty` (nothing but whitespace),
//   `<setting>: <path> is over 1048576 bytes; not a PEM file` (InvalidArgument).
// It does not parse the PEM: the caller's parser (OpenSSL, gRPC) does, with
// errors of its own; see HasPemBlock for a cheap check.
absl::StatusOr<std::string> ReadPemFile(absl::string_view setting, const std::string& path);

// True when `contents` hold a PEM block header (`-----BEGIN `). For callers
// that hand the text to gRPC, which refuses bad PEM with only a log line.
bool HasPemBlock(absl::string_view contents);

}  // namespace ferry

#endif  // FERRY_CORE_COMMON_PEM_FILE_H_
