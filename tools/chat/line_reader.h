#ifndef LLMC_TOOLS_CHAT_LINE_READER_H_
#define LLMC_TOOLS_CHAT_LINE_READER_H_

#include <termios.h>

#include <optional>
#include <ostream>
#include <string>

#include "absl/strings/string_view.h"
#include "tools/chat/interrupt_signal.h"

namespace llmc::chat {

// Reads the user's messages from a file descriptor, waiting on it and on Ctrl-C together.
//
// On a terminal it edits the line itself (no readline here): the terminal is put in non-canonical, no-echo
// mode while a prompt is shown and restored afterwards, so that it knows what was typed when Ctrl-C comes.
// Backspace, Ctrl-U (erase the line) and Ctrl-W (erase a word) edit; arrow and other escape sequences are
// ignored. Ctrl-C clears the line and shows the prompt again; Ctrl-C on an empty line right after another
// Ctrl-C, or Ctrl-D on an empty line, ends the input.
//
// From a pipe or file it reads one message per line and echoes it after the prompt, so the transcript
// reads like a terminal session.
//
// Either way a line ending with a backslash continues onto the next one (the backslash becomes a newline),
// which also makes pasted multi-line text one message.
class LineReader {
 public:
  LineReader(int input_fd, InterruptSignal& interrupts, std::ostream& out);
  ~LineReader();
  LineReader(const LineReader&) = delete;
  LineReader& operator=(const LineReader&) = delete;

  // Shows `prompt` and returns the next message (possibly empty), or nullopt when the input ended.
  std::optional<std::string> ReadMessage(absl::string_view prompt, absl::string_view continuation_prompt);

  bool is_terminal() const { return terminal_; }

 private:
  enum class LineEnd { kLine, kEndOfInput, kInterrupt };

  // Reads one physical line into `line` (what was typed so far, when interrupted).
  LineEnd ReadLine(std::string& line, bool message_empty);
  // Applies one byte typed on a terminal; true when it ended the line with `end`.
  bool EditLine(char byte, std::string& line, bool message_empty, LineEnd& end);
  // Waits for input or an interrupt and appends what arrived to pending_. kLine means bytes arrived.
  LineEnd Fill();
  void EnterEditMode();
  void LeaveEditMode();
  void Echo(absl::string_view text);

  int fd_;
  InterruptSignal& interrupts_;
  std::ostream& out_;
  bool terminal_ = false;
  bool edit_mode_ = false;
  struct termios saved_mode_ = {};
  std::string pending_;  // bytes read but not consumed yet
  bool input_closed_ = false;
  int escape_state_ = 0;  // inside an escape sequence being skipped: 1 after ESC, 2 inside CSI
};

}  // namespace llmc::chat

#endif  // LLMC_TOOLS_CHAT_LINE_READER_H_
