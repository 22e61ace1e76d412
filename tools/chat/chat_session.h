#ifndef LLMC_TOOLS_CHAT_CHAT_SESSION_H_
#define LLMC_TOOLS_CHAT_CHAT_SESSION_H_

#include <ostream>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "tools/chat/chat_client.h"
#include "tools/chat/chat_protocol.h"
#include "tools/chat/interrupt_signal.h"

namespace llmc::chat {

struct ChatSessionOptions {
  ServerConnection server;
  ChatRequestOptions request;
  std::string system;  // empty: no system message
  bool debug = false;
};

// One conversation: the history, the commands, and each turn printed as it streams in. Replies go to `out`;
// errors and --debug details to `err`. A turn that failed or was interrupted leaves the history as it was
// (neither the user's message nor the partial reply stays), so the next request is a clean conversation.
class ChatSession {
 public:
  ChatSession(ChatSessionOptions options, InterruptSignal& interrupts, std::ostream& out, std::ostream& err);

  // Handles what the user typed: a /command, or a message to send. False when the user asked to leave.
  bool Handle(const std::string& input);

  const std::vector<ChatMessage>& history() const { return history_; }
  const std::string& model() const { return options_.request.model; }

 private:
  bool RunCommand(absl::string_view name, absl::string_view argument);
  void SwitchModel(const std::string& name);
  void Reply(const std::string& text);
  // --debug: the conversation as the server renders it; false when Ctrl-C stopped it.
  bool ShowRenderedPrompt(const std::vector<ChatMessage>& messages);
  void ShowSpeed(const ReplyOutcome& outcome);
  std::vector<ChatMessage> Conversation() const;
  std::ostream& Err();

  ChatSessionOptions options_;
  InterruptSignal& interrupts_;
  std::ostream& out_;
  std::ostream& err_;
  std::vector<ChatMessage> history_;  // user and assistant turns; the system prompt is added per request
  bool server_lacks_tokenize_ = false;
};

// The one-line summary of the commands.
std::string CommandSummary();

}  // namespace llmc::chat

#endif  // LLMC_TOOLS_CHAT_CHAT_SESSION_H_
