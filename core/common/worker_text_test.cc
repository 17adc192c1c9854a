#include "core/common/worker_text.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ferry {
namespace {

using ::testing::EndsWith;
using ::testing::HasSubstr;
using ::testing::Not;

// What any sanitized text must be: valid UTF-8 without a control character.
bool IsOnePrintableLine(const std::string& text) {
  for (size_t i = 0; i < text.size();) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c < 0x20 || c == 0x7F) return false;
    int length = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3
                 : (c & 0xF8) == 0xF0                ? 4
                                                     : 0;
    if (length == 0 || i + length > text.size()) return false;
    for (int k = 1; k < length; ++k) {
      if ((static_cast<unsigned char>(text[i + k]) & 0xC0) != 0x80) return false;
    }
    i += static_cast<size_t>(length);
  }
  return true;
}

TEST(WorkerTextTest, PlainTextIsUnchanged) {
  EXPECT_EQ(SanitizeWorkerName("worker-7 on host.example"), "worker-7 on host.example");
  EXPECT_EQ(SanitizeWorkerMessage("Größe ungültig: 日本"), "Größe ungültig: 日本");
  EXPECT_EQ(SanitizeWorkerMessage(""), "");
}

TEST(WorkerTextTest, NewlinesAndEscapesCannotForgeALogLine) {
  const std::string sanitized =
      SanitizeWorkerName("w\n2026-01-01T00:00:00.000Z ERROR forged\r\x1b[31mred\t\x7f");
  EXPECT_EQ(sanitized,
            "w\\x0a2026-01-01T00:00:00.000Z ERROR forged\\x0d\\x1b[31mred\\x09\\x7f");
  EXPECT_TRUE(IsOnePrintableLine(sanitized));
}

TEST(WorkerTextTest, UnicodeLineSeparatorsAndBidiOverridesAreEscaped) {
  EXPECT_EQ(SanitizeWorkerName("a\u2028b\u202Ec\xC2\x85"), "a\\u{2028}b\\u{202e}c\\u{0085}");
}

TEST(WorkerTextTest, InvalidUtf8BecomesReplacementCharacters) {
  // A lone continuation byte, a truncated sequence, an overlong '/', a UTF-16
  // surrogate and a code point above U+10FFFF.
  const std::string sanitized =
      SanitizeWorkerMessage(std::string("a\x80" "b\xC3" "c\xC0\xAF" "d\xED\xA0\x80" "e\xF4\x90\x80\x80"));
  EXPECT_TRUE(IsOnePrintableLine(sanitized)) << sanitized;
  EXPECT_THAT(sanitized, Not(HasSubstr("\x80")));
  EXPECT_EQ(sanitized.substr(0, 4), "a\xEF\xBF\xBD");
  EXPECT_THAT(sanitized, HasSubstr("b\xEF\xBF\xBD" "c"));
  EXPECT_THAT(sanitized, EndsWith("e\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"));
}

TEST(WorkerTextTest, HugeTextIsBoundedAndSaysHowMuchWasCut) {
  const std::string huge = std::string(10 << 20, 'x') + "\nERROR forged";
  const std::string sanitized = SanitizeWorkerName(huge);
  EXPECT_LE(sanitized.size(), kMaxWorkerNameBytes + 32);
  EXPECT_EQ(sanitized.substr(0, kMaxWorkerNameBytes), std::string(kMaxWorkerNameBytes, 'x'));
  EXPECT_THAT(sanitized,
              EndsWith(absl::StrCat("...[", huge.size() - kMaxWorkerNameBytes, " bytes truncated]")));
  EXPECT_TRUE(IsOnePrintableLine(sanitized));
  EXPECT_LE(SanitizeWorkerMessage(huge).size(), kMaxWorkerMessageBytes + 32);
}

TEST(WorkerTextTest, CutsOnACharacterBoundary) {
  // 3-byte characters: 256 bytes hold 85 of them (255 bytes), never half of one.
  std::string text;
  for (int i = 0; i < 200; ++i) text += "日";
  const std::string sanitized = SanitizeWorkerName(text);
  EXPECT_TRUE(IsOnePrintableLine(sanitized)) << sanitized;
  EXPECT_EQ(sanitized.find("..."), 255u);
  // An escape is never cut in half either.
  const std::string escapes = SanitizeWorkerText(std::string(10, '\n'), 10);
  EXPECT_EQ(escapes.substr(0, 8), "\\x0a\\x0a");
  EXPECT_THAT(escapes, EndsWith("...[8 bytes truncated]"));
}

}  // namespace
}  // namespace ferry
