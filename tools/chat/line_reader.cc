#include "tools/chat/line_reader.h"

#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <utility>

namespace llmc::chat {
namespace {

constexpr char kEraseOneColumn[] = "\b \b";

// Where the terminal's saved mode lives for the termination handlers (one LineReader per process).
int g_restore_fd = -1;
struct termios g_restore_mode = {};

// SIGTERM, SIGHUP or SIGQUIT while the terminal is in edit mode: give the user's terminal back its echo,
// then die of the signal as usual. tcsetattr is async-signal-safe.
void RestoreTerminalAndDie(int signal_number) {
  if (g_restore_fd >= 0) tcsetattr(g_restore_fd, TCSANOW, &g_restore_mode);
  signal(signal_number, SIG_DFL);
  raise(signal_number);
}

// Removes the last UTF-8 character of `line`; false when it was empty.
bool EraseLastCharacter(std::string& line) {
  if (line.empty()) return false;
  while (!line.empty() && (static_cast<unsigned char>(line.back()) & 0xC0) == 0x80) line.pop_back();
  if (!line.empty()) line.pop_back();
  return true;
}

bool IsSpace(char c) { return c == ' ' || c == '\t'; }

}  // namespace

LineReader::LineReader(int input_fd, InterruptSignal& interrupts, std::ostream& out)
    : fd_(input_fd), interrupts_(interrupts), out_(out) {
  terminal_ = isatty(fd_) == 1 && tcgetattr(fd_, &saved_mode_) == 0;
  if (terminal_) {
    g_restore_fd = fd_;
    g_restore_mode = saved_mode_;
    for (int signal_number : {SIGTERM, SIGHUP, SIGQUIT}) signal(signal_number, RestoreTerminalAndDie);
  }
}

LineReader::~LineReader() {
  LeaveEditMode();
  if (terminal_) {
    for (int signal_number : {SIGTERM, SIGHUP, SIGQUIT}) signal(signal_number, SIG_DFL);
    g_restore_fd = -1;
  }
}

void LineReader::EnterEditMode() {
  if (!terminal_ || edit_mode_) return;
  struct termios mode = saved_mode_;
  // ISIG stays on, so Ctrl-C is still SIGINT (and the kernel drops typed-ahead input with it).
  mode.c_lflag &= ~(ICANON | ECHO);
  mode.c_cc[VMIN] = 1;
  mode.c_cc[VTIME] = 0;
  edit_mode_ = tcsetattr(fd_, TCSANOW, &mode) == 0;
}

void LineReader::LeaveEditMode() {
  if (!edit_mode_) return;
  tcsetattr(fd_, TCSANOW, &saved_mode_);
  edit_mode_ = false;
}

void LineReader::Echo(absl::string_view text) { out_ << text << std::flush; }

std::optional<std::string> LineReader::ReadMessage(absl::string_view prompt, absl::string_view continuation_prompt) {
  EnterEditMode();
  std::string message;
  bool continued = false;        // `message` holds lines that ended with a backslash
  bool after_interrupt = false;  // the last thing at this prompt was Ctrl-C
  Echo(prompt);
  while (true) {
    std::string line;
    const LineEnd end = ReadLine(line, !continued);
    if (end == LineEnd::kInterrupt) {
      const bool nothing_typed = line.empty() && !continued;
      Echo("^C\n");
      if (nothing_typed && after_interrupt) {
        LeaveEditMode();
        return std::nullopt;
      }
      if (nothing_typed) Echo("(press Ctrl-C again or Ctrl-D to exit)\n");
      message.clear();
      continued = false;
      after_interrupt = true;
      Echo(prompt);
      continue;
    }
    if (end == LineEnd::kEndOfInput) {
      LeaveEditMode();
      Echo("\n");
      if (!continued) return std::nullopt;
      message.pop_back();  // the newline of the last continued line: the input ended mid-message
      return message;
    }
    after_interrupt = false;
    if (!terminal_) Echo(line + "\n");
    if (!line.empty() && line.back() == '\\') {
      line.pop_back();
      message += line;
      message += '\n';
      continued = true;
      Echo(continuation_prompt);
      continue;
    }
    message += line;
    LeaveEditMode();
    return message;
  }
}

LineReader::LineEnd LineReader::ReadLine(std::string& line, bool message_empty) {
  while (true) {
    if (terminal_) {
      for (size_t i = 0; i < pending_.size();) {
        LineEnd end;
        if (EditLine(pending_[i++], line, message_empty, end)) {
          pending_.erase(0, i);
          return end;
        }
      }
      pending_.clear();
    } else {
      if (const size_t newline = pending_.find('\n'); newline != std::string::npos) {
        line = pending_.substr(0, newline);
        pending_.erase(0, newline + 1);
        if (!line.empty() && line.back() == '\r') line.pop_back();
        return LineEnd::kLine;
      }
      if (input_closed_ && !pending_.empty()) {  // a last line without a newline
        line = std::move(pending_);
        pending_.clear();
        return LineEnd::kLine;
      }
    }
    if (input_closed_) return LineEnd::kEndOfInput;
    if (const LineEnd filled = Fill(); filled == LineEnd::kInterrupt) {
      if (terminal_) pending_.clear();  // the kernel dropped the typed-ahead input too
      return filled;
    }
  }
}

bool LineReader::EditLine(char byte, std::string& line, bool message_empty, LineEnd& end) {
  const auto c = static_cast<unsigned char>(byte);
  if (escape_state_ == 1) {  // after ESC: CSI (ESC [) and SS3 (ESC O) go on, anything else ends it
    escape_state_ = (c == '[' || c == 'O') ? 2 : 0;
    return false;
  }
  if (escape_state_ == 2) {  // parameters until the final byte
    if (c >= 0x40 && c <= 0x7e) escape_state_ = 0;
    return false;
  }
  switch (c) {
    case '\r':
    case '\n':
      Echo("\n");
      end = LineEnd::kLine;
      return true;
    case 0x04:  // Ctrl-D: the end of input on an empty prompt, the end of a continued message after one
      if (!line.empty()) return false;
      if (message_empty) {
        end = LineEnd::kEndOfInput;
      } else {
        Echo("\n");
        end = LineEnd::kLine;
      }
      return true;
    case 0x7f:
    case 0x08:
      if (EraseLastCharacter(line)) Echo(kEraseOneColumn);
      return false;
    case 0x15:  // Ctrl-U
      while (EraseLastCharacter(line)) Echo(kEraseOneColumn);
      return false;
    case 0x17:  // Ctrl-W
      while (!line.empty() && IsSpace(line.back()) && EraseLastCharacter(line)) Echo(kEraseOneColumn);
      while (!line.empty() && !IsSpace(line.back()) && EraseLastCharacter(line)) Echo(kEraseOneColumn);
      return false;
    case 0x1b:
      escape_state_ = 1;
      return false;
    default:
      if (c < 0x20 && c != '\t') return false;  // other control keys do nothing
      line.push_back(byte);
      Echo(absl::string_view(&byte, 1));
      return false;
  }
}

LineReader::LineEnd LineReader::Fill() {
  struct pollfd fds[2] = {{fd_, POLLIN, 0}, {interrupts_.fd(), POLLIN, 0}};
  while (true) {
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;  // the pipe says whether that was Ctrl-C
      input_closed_ = true;
      return LineEnd::kEndOfInput;
    }
    if ((fds[1].revents & POLLIN) != 0) {
      interrupts_.Take();
      return LineEnd::kInterrupt;
    }
    if (fds[0].revents == 0) continue;
    char buffer[4096];
    const ssize_t received = read(fd_, buffer, sizeof(buffer));
    if (received > 0) {
      pending_.append(buffer, static_cast<size_t>(received));
      return LineEnd::kLine;
    }
    if (received < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    input_closed_ = true;
    return LineEnd::kEndOfInput;
  }
}

}  // namespace llmc::chat
