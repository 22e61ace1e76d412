#include "tools/chat/chat_session.h"

#include <algorithm>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "tools/chat/terminal_text.h"

namespace llmc::chat {

std::string CommandSummary() {
  return "commands: /clear (forget the conversation), /model NAME (switch model), /system TEXT (set the system "
         "prompt; alone: remove it), /help, /exit; start a message with // to send one beginning with /";
}

ChatSession::ChatSession(ChatSessionOptions options, InterruptSignal& interrupts, std::ostream& out, std::ostream& err)
    : options_(std::move(options)), interrupts_(interrupts), out_(out), err_(err) {}

std::ostream& ChatSession::Err() {
  out_.flush();  // keep the two streams in order on a terminal
  return err_;
}

bool ChatSession::Handle(const std::string& input) {
  const absl::string_view text = absl::StripAsciiWhitespace(input);
  if (text.empty()) return true;
  if (absl::StartsWith(text, "//")) {
    Reply(std::string(text.substr(1)));
    return true;
  }
  if (absl::StartsWith(text, "/")) {
    const size_t space = text.find_first_of(" \t\n");
    const absl::string_view name = text.substr(0, space);
    const absl::string_view argument =
        space == absl::string_view::npos ? absl::string_view() : absl::StripAsciiWhitespace(text.substr(space));
    return RunCommand(name, argument);
  }
  Reply(input);
  return true;
}

bool ChatSession::RunCommand(absl::string_view name, absl::string_view argument) {
  if (name == "/exit" || name == "/quit") return false;
  if (name == "/clear") {
    history_.clear();
    out_ << "[conversation cleared" << (options_.system.empty() ? "" : "; the system prompt stays") << "]\n"
         << std::flush;
  } else if (name == "/model") {
    if (argument.empty()) {
      out_ << "[model: " << options_.request.model << "]\n" << std::flush;
    } else {
      SwitchModel(std::string(argument));
    }
  } else if (name == "/system") {
    options_.system = std::string(argument);
    out_ << (argument.empty() ? "[system prompt removed]\n" : "[system prompt set]\n") << std::flush;
  } else if (name == "/help") {
    out_ << CommandSummary() << "\n"
         << "End a line with \\ to continue the message on the next line. Ctrl-C stops a reply; Ctrl-C twice or "
            "Ctrl-D on an empty prompt quits.\n"
         << std::flush;
  } else {
    Err() << "unknown command " << name << "; " << CommandSummary() << "\n";
  }
  return true;
}

void ChatSession::SwitchModel(const std::string& name) {
  interrupts_.Take();
  absl::StatusOr<std::vector<std::string>> models = ListModels(options_.server);
  interrupts_.Take();
  if (absl::IsCancelled(models.status())) {
    out_ << "[interrupted]\n" << std::flush;
    return;
  }
  if (!models.ok()) {
    Err() << "error: cannot check the model: " << ForTerminal(models.status().message()) << "\n";
    return;
  }
  if (std::find(models->begin(), models->end(), name) == models->end()) {
    Err() << "error: the server has no model '" << name << "' (it serves: " << ForTerminal(absl::StrJoin(*models, ", "))
          << "); still using " << options_.request.model << "\n";
    return;
  }
  options_.request.model = name;
  out_ << "[model " << name << " is served: switched to it]\n" << std::flush;
}

std::vector<ChatMessage> ChatSession::Conversation() const {
  std::vector<ChatMessage> messages;
  if (!options_.system.empty()) messages.push_back({"system", options_.system});
  messages.insert(messages.end(), history_.begin(), history_.end());
  return messages;
}

void ChatSession::Reply(const std::string& text) {
  std::vector<ChatMessage> messages = Conversation();
  messages.push_back({"user", text});
  interrupts_.Take();  // a Ctrl-C from before this request is not meant for it
  if (options_.debug && !ShowRenderedPrompt(messages)) return;

  ReplyCallbacks callbacks;
  callbacks.on_start = [this] { out_ << "ASSISTANT: " << std::flush; };
  // Reasoning shows first, marked apart; the history keeps only the answer, as chat templates expect.
  bool in_reasoning = false;
  // The model's text may hold terminal control sequences (its own, or a prompt injection's): they are
  // dropped before printing; the history keeps the text as the server sent it.
  TerminalTextFilter reasoning_filter;
  TerminalTextFilter text_filter;
  callbacks.on_reasoning = [this, &in_reasoning, &reasoning_filter](absl::string_view delta) {
    if (!in_reasoning) out_ << "[reasoning] ";
    in_reasoning = true;
    out_ << reasoning_filter.Filter(delta) << std::flush;
  };
  callbacks.on_text = [this, &in_reasoning, &text_filter](absl::string_view delta) {
    if (in_reasoning) out_ << "\n[answer] ";
    in_reasoning = false;
    out_ << text_filter.Filter(delta) << std::flush;
  };
  const ReplyOutcome outcome = StreamReply(options_.server, options_.request, messages, callbacks);
  interrupts_.Take();
  if (outcome.started) out_ << "\n" << std::flush;
  switch (outcome.kind) {
    case ReplyOutcome::Kind::kCompleted:
      history_.push_back({"user", text});
      history_.push_back({"assistant", outcome.text});
      if (options_.debug) ShowSpeed(outcome);
      return;
    case ReplyOutcome::Kind::kInterrupted:
      out_ << "[interrupted]\n" << std::flush;
      return;
    case ReplyOutcome::Kind::kFailed:
      Err() << "error: " << ForTerminal(outcome.error) << "\n";
      return;
  }
}

bool ChatSession::ShowRenderedPrompt(const std::vector<ChatMessage>& messages) {
  if (server_lacks_tokenize_) return true;
  absl::StatusOr<RenderedPrompt> rendered =
      RenderPrompt(options_.server, options_.request.model, messages, options_.request.extra_body);
  if (absl::IsCancelled(rendered.status())) {
    interrupts_.Take();
    out_ << "[interrupted]\n" << std::flush;
    return false;
  }
  if (absl::IsNotFound(rendered.status())) {
    server_lacks_tokenize_ = true;
    Err() << "[debug: the server has no /tokenize endpoint (HTTP 404), so the rendered prompt cannot be shown]\n";
    return true;
  }
  if (!rendered.ok()) {
    Err() << "[debug: cannot render the prompt: " << ForTerminal(rendered.status().message()) << "]\n";
    return true;
  }
  std::ostream& err = Err();
  err << "[prompt as the server renders it, " << rendered->tokens << " tokens]\n" << ForTerminal(rendered->text);
  if (!absl::EndsWith(rendered->text, "\n")) err << "\n";
  err << "[end of prompt]\n" << std::flush;
  return true;
}

void ChatSession::ShowSpeed(const ReplyOutcome& outcome) {
  const double seconds = absl::ToDoubleSeconds(outcome.elapsed);
  const double rate = seconds > 0 ? static_cast<double>(outcome.tokens) / seconds : 0;
  std::string first_token = "none";
  if (outcome.time_to_first_token) {
    first_token = absl::StrFormat("%.0f ms", absl::ToDoubleMilliseconds(*outcome.time_to_first_token));
  }
  Err() << absl::StrFormat("[%d tokens, %.1f tokens/s, time to first token %s]\n", outcome.tokens, rate, first_token)
        << std::flush;
}

}  // namespace llmc::chat
