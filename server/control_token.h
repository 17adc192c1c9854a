// The bearer token Control calls must present (control.token_file).
//
// Threading: a plain function; call it from any thread.
#ifndef FERRY_SERVER_CONTROL_TOKEN_H_
#define FERRY_SERVER_CONTROL_TOKEN_H_

#include <string>

#include "absl/status/statusor.h"

namespace ferry {

// The token in `path`, with surrounding whitespace (a trailing newline)
// removed; "" (no token required) when `path` is empty. InvalidArgument,
// naming control.token_file, when the file cannot be read or holds nothing.
absl::StatusOr<std::string> ReadControlToken(const std::string& path);

}  // namespace ferry

#endif  // FERRY_SERVER_CONTROL_TOKEN_H_
