#include "tools/chat/terminal_text.h"

namespace llmc::chat {

constexpr unsigned char kEsc = 0x1b;
constexpr unsigned char kBel = 0x07;

void TerminalTextFilter::Text(unsigned char c, std::string& out) {
  if (c == kEsc) {
    state_ = State::kEscape;
  } else if (c == 0xc2) {
    state_ = State::kAfterC2;  // U+0080..U+009F are C2 80..C2 9F in UTF-8
  } else if (c == '\n' || c == '\t' || (c >= 0x20 && c != 0x7f)) {
    out += static_cast<char>(c);
  }  // else: another C0 control or DEL, dropped
}

// A C1 control (0x80..0x9f): those that open a sequence are read as ESC's two-byte forms.
void TerminalTextFilter::C1(unsigned char c) {
  switch (c) {
    case 0x9b:  // CSI
      state_ = State::kCsi;
      break;
    case 0x90:  // DCS
    case 0x98:  // SOS
    case 0x9d:  // OSC
    case 0x9e:  // PM
    case 0x9f:  // APC
      state_ = State::kString;
      break;
    default:
      state_ = State::kText;
  }
}

std::string TerminalTextFilter::Filter(absl::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char ch : text) {
    const unsigned char c = static_cast<unsigned char>(ch);
    switch (state_) {
      case State::kText:
        Text(c, out);
        break;
      case State::kAfterC2:
        if (c >= 0x80 && c <= 0x9f) {
          C1(c);
        } else if (c >= 0xa0 && c <= 0xbf) {
          state_ = State::kText;  // U+00A0..U+00BF: text
          out += static_cast<char>(0xc2);
          out += static_cast<char>(c);
        } else {
          // A C2 that is not UTF-8 is dropped: printed alone, it could meet a later 80..9F byte once the
          // bytes between them were dropped, and make a C1 control.
          state_ = State::kText;
          Text(c, out);
        }
        break;
      case State::kEscape:
        if (c == '[') {
          state_ = State::kCsi;
        } else if (c == ']' || c == 'P' || c == 'X' || c == '^' || c == '_') {
          state_ = State::kString;
        } else if (c >= 0x20 && c <= 0x2f) {
          state_ = State::kEscapeIntermediate;  // ESC ( B and the like
        } else if (c >= 0x30 && c <= 0x7e) {
          state_ = State::kText;  // ESC c, ESC 7, ...: dropped with it
        } else {
          state_ = State::kText;
          Text(c, out);
        }
        break;
      case State::kEscapeIntermediate:
        if (c >= 0x20 && c <= 0x2f) break;
        state_ = State::kText;
        if (c < 0x30 || c > 0x7e) Text(c, out);
        break;
      case State::kCsi:
        if (c >= 0x20 && c <= 0x3f) break;  // parameters and intermediates
        state_ = State::kText;
        if (c < 0x40 || c > 0x7e) Text(c, out);  // not a final byte: the sequence was cut short
        break;
      case State::kString:
        // A terminal would swallow all text up to the terminator; a newline ends it here, so that an
        // unterminated sequence costs the rest of its line, not the rest of the answer.
        if (c == kBel) {
          state_ = State::kText;
        } else if (c == kEsc) {
          state_ = State::kStringEscape;
        } else if (c == '\n') {
          state_ = State::kText;
          out += '\n';
        } else if (c == 0xc2) {
          // U+009C (ST) ends it too; any other character after C2 is text of the sequence.
          state_ = State::kStringEscape;
        }
        break;
      case State::kStringEscape:
        // After ESC inside a string sequence: `\` (ST) ends it, as does C2 9C. Anything else stays inside.
        if (c == '\\' || c == 0x9c) {
          state_ = State::kText;
        } else if (c == '\n') {
          state_ = State::kText;
          out += '\n';
        } else {
          state_ = State::kString;
        }
        break;
    }
  }
  return out;
}

std::string ForTerminal(absl::string_view text) { return TerminalTextFilter().Filter(text); }

}  // namespace llmc::chat
