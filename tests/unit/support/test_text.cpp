// Byte-string helpers (support/base/text.hpp): escape_controls, the one rule for values in comment lines.
#include "support/base/text.hpp"

#include <catch2/catch.hpp>

using namespace lockstep;

TEST_CASE("escape_controls keeps a value on one line and leaves other bytes alone", "[text]") {
  CHECK(escape_controls("oci:/img/a\ntouch /tmp/x\r\n") == "oci:/img/a\\x0atouch /tmp/x\\x0d\\x0a");
  CHECK(escape_controls(std::string("\t\x1b[31m\x7f\0z", 9)) == "\\x09\\x1b[31m\\x7f\\x00z");
  // C1 controls (UTF-8 U+0080..U+009F: NEL, CSI) are escaped; other UTF-8 text and stray bytes are kept.
  CHECK(escape_controls("a\xc2\x85"
                        "b\xc2\x9b"
                        "c") == "a\\u0085b\\u009bc");
  CHECK(escape_controls("caf\xc3\xa9 \xc2\xa0 \xc2 \xff $(x) `y`; 'q' \"q\"") ==
        "caf\xc3\xa9 \xc2\xa0 \xc2 \xff $(x) `y`; 'q' \"q\"");
  CHECK(escape_controls("") == "");
}

TEST_CASE("diagnostic_text escapes controls but keeps lines and tabs, and cuts a long line", "[text]") {
  CHECK(diagnostic_text("bad ref 'a\x1b]0;pwned\x07\x1b[2J'\n\tchange it") ==
        "bad ref 'a\\x1b]0;pwned\\x07\\x1b[2J'\n\tchange it");
  CHECK(diagnostic_text("one\r\ntwo\n") == "one\\x0d\ntwo\n");
  const std::string cut = diagnostic_text(std::string(10000, '[') + "\nnext", 100);
  CHECK(cut == std::string(100, '[') + "[... 9900 more bytes of this line left out]\nnext");
  // Never inside a UTF-8 sequence.
  CHECK(diagnostic_text("ab\xc3\xa9z", 3) == "ab[... 3 more bytes of this line left out]");
  CHECK(diagnostic_text(diagnostic_text("x\x1b")) == diagnostic_text("x\x1b"));
}
