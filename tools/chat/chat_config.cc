#include "tools/chat/chat_config.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "common/config/config_field.h"

namespace llmc::chat {

absl::Status ChatConfig::Validate() const {
  // The server judges the temperature's range; only a number is required here.
  if (!std::isfinite(temperature)) return absl::InvalidArgumentError("temperature must be a finite number");
  if (max_tokens < 0) return absl::InvalidArgumentError("max_tokens must be 0 (server default) or positive");
  if (timeout <= absl::ZeroDuration()) return absl::InvalidArgumentError("timeout must be positive");
  return absl::OkStatus();
}

std::string ChatHelp() {
  ChatConfig defaults;
  std::string text =
      "llmc-chat: chat in the terminal with a model behind any OpenAI-compatible server\n\n"
      "Usage: llmc-chat --url http://HOST:PORT/v1 [--model NAME] [--flag value ...]\n\n"
      "Type a message and press Enter; end a line with \\ to continue the message on the next one.\n"
      "Commands: /clear, /model NAME, /system TEXT, /help, /exit. Ctrl-C stops a reply; Ctrl-C twice\n"
      "or Ctrl-D on an empty prompt quits.\n\n"
      "Flags (--max-tokens and --max_tokens are the same flag):\n";
  for (const config::ConfigField& field : config::CollectConfigFields(defaults)) {
    if (IsHiddenChatFlag(field.key)) continue;
    absl::StrAppend(&text, "  --", absl::StrReplaceAll(field.key, {{"_", "-"}}), "=<", field.type_name,
                    ">  (default: ", field.format().empty() ? "\"\"" : field.format(), ")\n      ", field.help, "\n");
  }
  return text;
}

}  // namespace llmc::chat
