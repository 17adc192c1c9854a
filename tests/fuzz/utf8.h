// IsUtf8: the fuzz targets' own UTF-8 check (RFC 3629: no overlong forms, no
// surrogates, nothing past U+10FFFF), written independently of the decoder's
// so a bug in one does not hide in the other.
//
// Threading: a pure function.
#ifndef FERRY_TESTS_FUZZ_UTF8_H_
#define FERRY_TESTS_FUZZ_UTF8_H_

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace ferry::fuzz {

inline bool IsUtf8(std::string_view text) {
  size_t i = 0;
  while (i < text.size()) {
    const uint8_t lead = static_cast<uint8_t>(text[i]);
    size_t length;
    uint32_t min;
    uint32_t code;
    if (lead <= 0x7F) {
      ++i;
      continue;
    } else if (lead >= 0xC2 && lead <= 0xDF) {
      length = 2, min = 0x80, code = lead & 0x1F;
    } else if (lead >= 0xE0 && lead <= 0xEF) {
      length = 3, min = 0x800, code = lead & 0x0F;
    } else if (lead >= 0xF0 && lead <= 0xF4) {
      length = 4, min = 0x10000, code = lead & 0x07;
    } else {
      return false;  // a continuation byte, C0/C1 or F5..FF
    }
    if (text.size() - i < length) return false;
    for (size_t k = 1; k < length; ++k) {
      const uint8_t next = static_cast<uint8_t>(text[i + k]);
      if ((next & 0xC0) != 0x80) return false;
      code = (code << 6) | (next & 0x3F);
    }
    if (code < min || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) return false;
    i += length;
  }
  return true;
}

}  // namespace ferry::fuzz

#endif  // FERRY_TESTS_FUZZ_UTF8_H_
