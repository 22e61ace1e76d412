// llmc-chat prints a model's output on the user's terminal: control sequences in it are dropped.
#include "tools/chat/terminal_text.h"

#include <string>
#include <vector>

#include "tests/support/catch.h"

namespace llmc::chat {
namespace {

bool HasControl(const std::string& text) {
  for (size_t i = 0; i < text.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7f) return true;
    if (c == 0xc2 && i + 1 < text.size() && static_cast<unsigned char>(text[i + 1]) >= 0x80 &&
        static_cast<unsigned char>(text[i + 1]) <= 0x9f) {
      return true;
    }
  }
  return false;
}

TEST_CASE("terminal text: control characters and escape sequences are dropped, text and newlines kept",
          "[unit][chat]") {
  CHECK(ForTerminal("plain text, 中文, café\n\tindented") == "plain text, 中文, café\n\tindented");
  CHECK(ForTerminal("\x1b[2J\x1b[H\x1b[31mred\x1b[0m") == "red");  // clear, home, colours
  CHECK(ForTerminal("a\x1b]0;pwned title\x07"
                    "b") == "ab");                                                  // OSC to BEL
  CHECK(ForTerminal("a\x1b]52;c;ZWNobyBwd25lZA==\x1b\\b") == "ab");                 // clipboard write, to ST
  CHECK(ForTerminal("a\x1b]8;;http://evil\x1b\\link\x1b]8;;\x1b\\b") == "alinkb");  // hyperlink
  CHECK(ForTerminal("a\x1bPq#0;2;0;0;0\x1b\\b") == "ab");                           // DCS (sixel)
  CHECK(ForTerminal("x\x1b"
                    "cy\x1b(Bz\x1b"
                    "7w") == "xyzw");  // RIS, charset, save cursor
  CHECK(ForTerminal("bell\x07 back\x08space cr\r del\x7f nul") == "bell backspace cr del nul");
  CHECK(ForTerminal("c1 \xc2\x9b"
                    "31mcsi\xc2\x9d"
                    "0;t\x07 end \xc2\x85!") == "c1 csi end !");
  CHECK(ForTerminal("\xc2\xa0nbsp \xc2\xa9") == "\xc2\xa0nbsp \xc2\xa9");  // U+00A0, U+00A9 are text
  // A C2 that is not UTF-8 cannot join a later byte into a C1 control once DEL between them is dropped.
  CHECK(ForTerminal("\xc2\x7f\x9b"
                    "2J") ==
        "\x9b"
        "2J");
  // An unterminated string sequence ends at the end of its line, not of the answer.
  CHECK(ForTerminal("a\x1b]0;title\nrest") == "a\nrest");
  // A CSI cut short by a control: the control is handled as text.
  CHECK(ForTerminal("a\x1b[12\nb") == "a\nb");
}

TEST_CASE("terminal text: a sequence split between streamed deltas is dropped whole", "[unit][chat]") {
  const std::string answer =
      "Hi \x1b]0;title\x1b\\there \x1b[1;31mbold\x1b[0m \xc2\x9b"
      "2J done\n";
  // Every split into two and into single bytes gives the same text as the whole.
  const std::string whole = ForTerminal(answer);
  CHECK(whole == "Hi there bold  done\n");
  for (size_t cut = 0; cut <= answer.size(); ++cut) {
    TerminalTextFilter filter;
    std::string out = filter.Filter(answer.substr(0, cut));
    out += filter.Filter(answer.substr(cut));
    INFO("cut at " << cut);
    CHECK(out == whole);
  }
  TerminalTextFilter bytes;
  std::string out;
  for (const char c : answer) out += bytes.Filter(std::string(1, c));
  CHECK(out == whole);
  CHECK_FALSE(HasControl(out));
}

TEST_CASE("terminal text: no control byte survives any input", "[unit][chat]") {
  // Every byte after every prefix that opens a sequence, and every byte alone.
  const std::vector<std::string> prefixes = {"", "\x1b", "\x1b[", "\x1b]", "\x1b(", "\xc2", "\x1b]x\x1b"};
  for (const std::string& prefix : prefixes) {
    for (int c = 0; c < 256; ++c) {
      for (int d = 0; d < 256; d += 17) {
        const std::string text = prefix + std::string(1, static_cast<char>(c)) + std::string(1, static_cast<char>(d));
        const std::string out = ForTerminal(text);
        INFO("prefix size " << prefix.size() << " byte " << c << " then " << d);
        CHECK_FALSE(HasControl(out));
      }
    }
  }
}

}  // namespace
}  // namespace llmc::chat
