#ifndef LLMC_WORKER_TOKENIZER_CHAT_TEMPLATE_H_
#define LLMC_WORKER_TOKENIZER_CHAT_TEMPLATE_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace llmc::tokenizer {

struct ChatTurn {
  std::string role;  // "system", "user" or "assistant"
  std::string content;
};

// A built-in chat template, chosen by name from the model manifest. Rendering refuses, with
// INVALID_ARGUMENT, message sequences the template cannot express (e.g. two user turns in a row for
// Llama 2). The interface leaves room for Jinja templates from tokenizer_config.json later.
class ChatTemplate {
 public:
  virtual ~ChatTemplate() = default;
  virtual absl::string_view name() const = 0;
  virtual absl::StatusOr<std::string> Render(absl::Span<const ChatTurn> messages, bool add_generation_prompt) const = 0;
};

// "chatml" (Qwen), "llama3", "llama2", "mistral", "vicuna" or "raw"; NOT_FOUND names the known ones.
absl::StatusOr<const ChatTemplate*> FindChatTemplate(absl::string_view name);
std::vector<std::string> ChatTemplateNames();

}  // namespace llmc::tokenizer

#endif  // LLMC_WORKER_TOKENIZER_CHAT_TEMPLATE_H_
