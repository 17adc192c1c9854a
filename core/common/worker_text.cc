#include "core/common/worker_text.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "core/common/utf8.h"

namespace ferry {
namespace {

// The code point of the UTF-8 sequence at the start of `text`, which is
// known to be valid (core/common/utf8.h decided), and its length.
uint32_t DecodeValidUtf8(absl::string_view text, int* length) {
  const auto byte = [&text](size_t i) { return static_cast<uint8_t>(text[i]); };
  const uint8_t lead = byte(0);
  *length = lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
  if (*length == 1) return lead;
  uint32_t value = lead & (0x7F >> *length);
  for (int i = 1; i < *length; ++i) value = (value << 6) | (byte(i) & 0x3F);
  return value;
}

// Characters that could break a log line, fake one, or reorder what a
// terminal shows.
bool MustEscape(uint32_t c) {
  return c < 0x20 || c == 0x7F || (c >= 0x80 && c <= 0x9F) || c == 0x2028 || c == 0x2029 ||
         (c >= 0x202A && c <= 0x202E) || (c >= 0x2066 && c <= 0x2069) || c == 0x200E ||
         c == 0x200F || c == 0xFEFF;
}

std::string Escape(uint32_t c) {
  char buffer[16];
  if (c < 0x80) {
    std::snprintf(buffer, sizeof(buffer), "\\x%02x", static_cast<unsigned>(c));
  } else {
    std::snprintf(buffer, sizeof(buffer), "\\u{%04x}", static_cast<unsigned>(c));
  }
  return buffer;
}

constexpr absl::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

}  // namespace

std::string SanitizeWorkerText(absl::string_view text, size_t max_bytes) {
  std::string out;
  out.reserve(std::min(text.size(), max_bytes));
  size_t at = 0;
  bool full = false;
  while (at < text.size() && !full) {
    // No input byte is shown in less than one output byte, so a window of
    // max_bytes (plus one sequence) bounds the scan, whatever the input size.
    const absl::string_view window = text.substr(at, max_bytes + 4);
    const size_t valid = ValidUtf8PrefixLength(window);
    if (valid == 0) {
      // This byte cannot start a valid sequence here.
      full = out.size() + kReplacement.size() > max_bytes;
      if (!full) {
        out.append(kReplacement.data(), kReplacement.size());
        ++at;
      }
      continue;
    }
    for (size_t i = 0; i < valid && !full;) {
      int length = 0;
      const uint32_t code_point = DecodeValidUtf8(window.substr(i), &length);
      const std::string escaped = MustEscape(code_point) ? Escape(code_point) : std::string();
      const absl::string_view piece =
          escaped.empty() ? window.substr(i, static_cast<size_t>(length)) : escaped;
      full = out.size() + piece.size() > max_bytes;
      if (full) break;
      out.append(piece.data(), piece.size());
      i += static_cast<size_t>(length);
      at += static_cast<size_t>(length);
    }
  }
  if (at < text.size()) absl::StrAppend(&out, "...[", text.size() - at, " bytes truncated]");
  return out;
}

}  // namespace ferry
