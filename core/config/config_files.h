// Checks, at config time, the files that settings name (control.token_file,
// the TLS certificates, keys and CAs), so that a missing, unreadable, empty
// or oversized file is reported with the config file and line of the setting
// (`ferry.yaml:146: control.token_file: cannot read /x: No such file or
// directory`) by `ferry --check_config`, instead of by a reader at startup
// that knows only the setting's name.
//
// The readers at startup (server/) still parse the contents (PEM); their
// errors get the location from LocateConfigError (core/config/config.h).
//
// Threading: a pure function of the file system; call it from any thread.
#ifndef FERRY_CORE_CONFIG_CONFIG_FILES_H_
#define FERRY_CORE_CONFIG_CONFIG_FILES_H_

#include <cstddef>
#include <string>

#include "absl/status/status.h"
#include "core/common/pem_file.h"

namespace ferry {

// Files named by settings hold a token or PEM text; anything bigger is the
// wrong file (or a device such as /dev/zero). Same limit as the PEM reader.
inline constexpr size_t kMaxNamedFileBytes = kMaxPemFileBytes;

struct NamedFile {
  std::string setting;   // e.g. "control.token_file"
  std::string path;      // the file it names
  std::string location;  // where the setting is written, "ferry.yaml:146"
};

// OK if `file.path` can be read and holds something other than whitespace,
// at most kMaxNamedFileBytes; otherwise InvalidArgument
//   `<location>: <setting>: cannot read <path>: <reason>`
// (or `... <path> is empty`, `... is a directory`, `... is over N bytes`).
// Never blocks on a FIFO or a device: the file is opened non-blocking.
absl::Status CheckNamedFile(const NamedFile& file);

}  // namespace ferry

#endif  // FERRY_CORE_CONFIG_CONFIG_FILES_H_
