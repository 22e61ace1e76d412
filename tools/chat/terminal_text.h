#ifndef LLMC_TOOLS_CHAT_TERMINAL_TEXT_H_
#define LLMC_TOOLS_CHAT_TERMINAL_TEXT_H_

#include <string>

#include "absl/strings/string_view.h"

namespace llmc::chat {

// Makes a server's text safe to print on a terminal: a model's output (or an error message) must not move
// the cursor, clear the screen, retitle the window, write the clipboard (OSC 52) or hide text. Keeps `\n`,
// `\t` and all other text, UTF-8 included; drops the other C0 controls and DEL, the C1 controls (U+0080 to
// U+009F), and whole escape sequences: CSI (`ESC [` ... final byte, or U+009B ...), the string sequences
// OSC, DCS, SOS, PM and APC (to BEL, `ESC \` or the end of the line), and two-byte `ESC x`. Stateful, so a
// sequence split between two streamed deltas is still dropped whole; use one filter per stream.
class TerminalTextFilter {
 public:
  std::string Filter(absl::string_view text);

 private:
  enum class State { kText, kEscape, kEscapeIntermediate, kCsi, kString, kStringEscape, kAfterC2 };
  void Text(unsigned char c, std::string& out);
  void C1(unsigned char c);

  State state_ = State::kText;
};

// TerminalTextFilter for one whole text.
std::string ForTerminal(absl::string_view text);

}  // namespace llmc::chat

#endif  // LLMC_TOOLS_CHAT_TERMINAL_TEXT_H_
