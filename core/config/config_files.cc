#include "core/config/config_files.h"

#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "core/common/pem_file.h"

namespace ferry {

absl::Status CheckNamedFile(const NamedFile& file) {
  const std::string prefix = file.location.empty()
                                 ? absl::StrCat(file.setting, ": ")
                                 : absl::StrCat(file.location, ": ", file.setting, ": ");
  absl::StatusOr<std::string> contents =
      ReadFileUpTo(file.path, kMaxNamedFileBytes, absl::StrCat(prefix, "cannot read ", file.path));
  // Every problem with a named file is a problem of the config.
  if (!contents.ok()) return absl::InvalidArgumentError(contents.status().message());
  if (contents->size() > kMaxNamedFileBytes) {
    return absl::InvalidArgumentError(absl::StrCat(prefix, file.path, " is over ",
                                                   kMaxNamedFileBytes,
                                                   " bytes; not a token or PEM file"));
  }
  if (absl::StripAsciiWhitespace(*contents).empty()) {
    return absl::InvalidArgumentError(absl::StrCat(prefix, file.path, " is empty"));
  }
  return absl::OkStatus();
}

}  // namespace ferry
