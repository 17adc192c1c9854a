#include "core/worker_text.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>

#include "absl/strings/str_cat.h"

namespace ferry {
namespace {

// The length of the valid UTF-8 sequence at the start of `text` (1 to 4), and
// its code point; 0 when it is not valid (overlong forms, surrogates and
// values above U+10FFFF are not valid).
int DecodeUtf8(absl::string_view text, uint32_t* code_point) {
  const auto byte = [&text](size_t i) { return static_cast<uint8_t>(text[i]); };
  const uint8_t lead = byte(0);
  if (lead < 0x80) {
    *code_point = lead;
    return 1;
  }
  int length = 0;
  uint32_t value = 0;
  uint32_t minimum = 0;
  if ((lead & 0xE0) == 0xC0) {
    length = 2, value = lead & 0x1F, minimum = 0x80;
  } else if ((lead & 0xF0) == 0xE0) {
    length = 3, value = lead & 0x0F, minimum = 0x800;
  } else if ((lead & 0xF8) == 0xF0) {
    length = 4, value = lead & 0x07, minimum = 0x10000;
  } else {
    return 0;
  }
  if (text.size() < static_cast<size_t>(length)) return 0;
  for (int i = 1; i < length; ++i) {
    if ((byte(i) & 0xC0) != 0x80) return 0;
    value = (value << 6) | (byte(i) & 0x3F);
  }
  if (value < minimum || value > 0x10FFFF || (value >= 0xD800 && value <= 0xDFFF)) return 0;
  *code_point = value;
  return length;
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
  while (at < text.size()) {
    uint32_t code_point = 0;
    const int length = DecodeUtf8(text.substr(at), &code_point);
    absl::string_view piece;
    std::string escaped;
    if (length == 0) {
      piece = kReplacement;
    } else if (MustEscape(code_point)) {
      escaped = Escape(code_point);
      piece = escaped;
    } else {
      piece = text.substr(at, static_cast<size_t>(length));
    }
    if (out.size() + piece.size() > max_bytes) break;
    out.append(piece.data(), piece.size());
    at += length == 0 ? 1 : static_cast<size_t>(length);
  }
  if (at < text.size()) absl::StrAppend(&out, "...[", text.size() - at, " bytes truncated]");
  return out;
}

}  // namespace ferry
