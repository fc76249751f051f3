// Text from files made safe to print: control characters and invalid UTF-8
// escaped, everything else kept.
#include <string>

#include <gtest/gtest.h>

#include "support/printable_text.h"

namespace kiln {
namespace {

TEST(PrintableText, NamesStayOnOneLine) {
  EXPECT_EQ(printableName(std::string("a\0b\nc\td", 7)), "a\\x00b\\x0ac\\x09d");
  EXPECT_EQ(printableName("plain name_1.x"), "plain name_1.x");
}

TEST(PrintableText, TerminalControlsAreEscaped) {
  // CSI that clears the screen, an OSC that sets the window title, a
  // carriage return, backspace and DEL.
  EXPECT_EQ(printableText("a\x1b[2Jb"), "a\\x1b[2Jb");
  EXPECT_EQ(printableText("\x1b]0;owned\x07"), "\\x1b]0;owned\\x07");
  EXPECT_EQ(printableText("ok\rfake\b\x7f"), "ok\\x0dfake\\x08\\x7f");
  // C1 controls, encoded (U+009B is CSI) or as a lone byte.
  EXPECT_EQ(printableText("x\xc2\x9b"
                          "2J"),
            "x\\xc2\\x9b2J");
  EXPECT_EQ(printableText("x\x9b"
                          "2J"),
            "x\\x9b2J");
}

TEST(PrintableText, MessagesKeepTheirLinesAndTabs) {
  EXPECT_EQ(printableText("first\n\tsecond\n"), "first\n\tsecond\n");
}

TEST(PrintableText, ValidUtf8IsKeptInvalidIsEscaped) {
  const std::string text = "caf\xc3\xa9 \xe6\xb7\xb7\xe5\x90\x88 \xf0\x9f\x94\xa5"; // café 混合 🔥
  EXPECT_EQ(printableText(text), text);
  EXPECT_EQ(printableText("\xc3"), "\\xc3");                            // cut short
  EXPECT_EQ(printableText("\xc0\xaf"), "\\xc0\\xaf");                   // overlong '/'
  EXPECT_EQ(printableText("\xed\xa0\x80"), "\\xed\\xa0\\x80");          // a surrogate
  EXPECT_EQ(printableText("\xf4\x90\x80\x80"), "\\xf4\\x90\\x80\\x80"); // past U+10FFFF
  EXPECT_EQ(printableText("\xff"
                          "a"),
            "\\xffa");
}

} // namespace
} // namespace kiln
