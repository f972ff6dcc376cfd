// printable(): what a damaged or hostile file's text becomes before it reaches a terminal.
#include "core/printable_text.hpp"
#include "core/errors.hpp"

#include <gtest/gtest.h>

namespace dlscale {
namespace {

TEST(PrintableText, KeepsPlainAndUnicodeText) {
  EXPECT_EQ(printable("fcn:784,1024,10 on node-a (rank 0) \\ 'x' \"y\""),
            "fcn:784,1024,10 on node-a (rank 0) \\ 'x' \"y\"");
  EXPECT_EQ(printable("名前 Übung µs"), "名前 Übung µs");
  EXPECT_EQ(printable(""), "");
}

TEST(PrintableText, EscapesWhatMovesTheCursorOrBreaksTheLine) {
  EXPECT_EQ(printable("\x1b[2J\x1b[31mred"), "\\x1b[2J\\x1b[31mred");
  EXPECT_EQ(printable("line\nbreak\r\t"), "line\\nbreak\\r\\t");
  EXPECT_EQ(printable(std::string("a\0b\x7f", 4)), "a\\x00b\\x7f");
  EXPECT_EQ(printable("\u202eevil\u2066"), "\\u202eevil\\u2066");  // bidirectional overrides
  EXPECT_EQ(printable("\xc2\x9b"
                      "2J"),
            "\\x9b2J");  // C1 control sequence introducer
}

TEST(PrintableText, EscapesBytesThatAreNotUtf8) {
  EXPECT_EQ(printable("\xff\xfe"), "\\xff\\xfe");
  EXPECT_EQ(printable("\xc3\x28"), "\\xc3(");               // a lead byte without its continuation
  EXPECT_EQ(printable("\xc0\xaf"), "\\xc0\\xaf");           // overlong '/'
  EXPECT_EQ(printable("\xed\xa0\x80"), "\\xed\\xa0\\x80");  // a UTF-16 surrogate
  EXPECT_EQ(printable("ok\xe5\x90"), "ok\\xe5\\x90");       // cut short at the end
}

// A refused setting's value is echoed printable: an environment variable holding a newline or an
// escape sequence still gives one line.
TEST(PrintableText, ARefusedChoiceIsEchoedOnOneLine) {
  try {
    require_choice("DLSCALE_CUDNN_API", "cuDNN API", "graph\n\x1b[2J", {"legacy", "graph"});
    ADD_FAILURE() << "an unknown value was accepted";
  } catch (const UserError& error) {
    EXPECT_EQ(std::string(error.what()),
              "DLSCALE_CUDNN_API: unknown cuDNN API 'graph\\n\\x1b[2J' (available: legacy, "
              "graph)");
  }
}

}  // namespace
}  // namespace dlscale
