#include "core/common/utf8.h"

#include <algorithm>
#include <limits>

#include "google/protobuf/stubs/common.h"

namespace ferry {

bool IsValidUtf8(absl::string_view text) {
  return ValidUtf8PrefixLength(text) == text.size();
}

size_t ValidUtf8PrefixLength(absl::string_view text) {
  // The validator takes an int length; nothing ferry checks comes near 2 GiB,
  // and a longer text is judged by its first 2 GiB.
  const size_t size = std::min(text.size(), static_cast<size_t>(std::numeric_limits<int>::max()));
  return static_cast<size_t>(google::protobuf::internal::UTF8SpnStructurallyValid(
      google::protobuf::StringPiece(text.data(), size)));
}

std::string ToValidUtf8(absl::string_view text) {
  static constexpr char kReplacement[] = "\xEF\xBF\xBD";  // U+FFFD
  std::string out;
  out.reserve(text.size() + 8);
  while (!text.empty()) {
    // The longest valid prefix is kept as is; the byte after it cannot start
    // a valid sequence there, so it is replaced and the scan goes on.
    const size_t valid = ValidUtf8PrefixLength(text);
    out.append(text.data(), valid);
    text.remove_prefix(valid);
    if (text.empty()) break;
    out.append(kReplacement, 3);
    text.remove_prefix(1);
  }
  return out;
}

}  // namespace ferry
