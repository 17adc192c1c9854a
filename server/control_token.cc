#include "server/control_token.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace ferry {

absl::StatusOr<std::string> ReadControlToken(const std::string& path) {
  if (path.empty()) return std::string();
  std::ifstream in(path);
  if (!in) {
    return absl::InvalidArgumentError(
        absl::StrCat("control.token_file: cannot read ", path, ": ", std::strerror(errno)));
  }
  std::string token((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  token = std::string(absl::StripAsciiWhitespace(token));
  if (token.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("control.token_file: ", path, " is empty; put the token in it"));
  }
  return token;
}

}  // namespace ferry
