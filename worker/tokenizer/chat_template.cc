#include "worker/tokenizer/chat_template.h"

#include <array>
#include <memory>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"

namespace llmc::tokenizer {
namespace {

absl::Status CheckRoles(absl::Span<const ChatTurn> messages, absl::string_view template_name) {
  if (messages.empty()) return absl::InvalidArgumentError("messages must not be empty");
  for (size_t i = 0; i < messages.size(); ++i) {
    const std::string& role = messages[i].role;
    if (role != "system" && role != "user" && role != "assistant") {
      return absl::InvalidArgumentError(absl::StrCat("messages[", i, "].role '", role, "' is not supported by the ",
                                                     template_name, " template (use system, user or assistant)"));
    }
    if (role == "system" && i != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("messages[", i, "]: the ", template_name, " template allows a system message only first"));
    }
  }
  return absl::OkStatus();
}

// For templates that need strict user/assistant alternation starting with a user turn, after an optional
// system message; returns the index of the first non-system message.
absl::StatusOr<size_t> CheckAlternation(absl::Span<const ChatTurn> messages, absl::string_view template_name) {
  RETURN_IF_ERROR(CheckRoles(messages, template_name));
  const size_t first = messages[0].role == "system" ? 1 : 0;
  if (first == messages.size()) {
    return absl::InvalidArgumentError(absl::StrCat("the ", template_name, " template needs a user message"));
  }
  for (size_t i = first; i < messages.size(); ++i) {
    const char* expected = (i - first) % 2 == 0 ? "user" : "assistant";
    if (messages[i].role != expected) {
      return absl::InvalidArgumentError(absl::StrCat("messages[", i, "] must be a ", expected, " message: the ",
                                                     template_name,
                                                     " template needs user and assistant turns to alternate"));
    }
  }
  return first;
}

// <|im_start|>role\ncontent<|im_end|>\n ... <|im_start|>assistant\n
class ChatMlTemplate final : public ChatTemplate {
 public:
  absl::string_view name() const override { return "chatml"; }
  absl::StatusOr<std::string> Render(absl::Span<const ChatTurn> messages, bool add_generation_prompt) const override {
    RETURN_IF_ERROR(CheckRoles(messages, name()));
    std::string out;
    for (const auto& m : messages) absl::StrAppend(&out, "<|im_start|>", m.role, "\n", m.content, "<|im_end|>\n");
    if (add_generation_prompt) out += "<|im_start|>assistant\n";
    return out;
  }
};

// Meta's Llama 3 instruct format; contents are trimmed as in the official template.
class Llama3Template final : public ChatTemplate {
 public:
  absl::string_view name() const override { return "llama3"; }
  absl::StatusOr<std::string> Render(absl::Span<const ChatTurn> messages, bool add_generation_prompt) const override {
    RETURN_IF_ERROR(CheckRoles(messages, name()));
    std::string out = "<|begin_of_text|>";
    for (const auto& m : messages) {
      absl::StrAppend(&out, "<|start_header_id|>", m.role, "<|end_header_id|>\n\n",
                      absl::StripAsciiWhitespace(m.content), "<|eot_id|>");
    }
    if (add_generation_prompt) out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
    return out;
  }
};

// <s>[INST] <<SYS>>\nsystem\n<</SYS>>\n\nuser [/INST] answer </s><s>[INST] user [/INST]
class Llama2Template final : public ChatTemplate {
 public:
  absl::string_view name() const override { return "llama2"; }
  absl::StatusOr<std::string> Render(absl::Span<const ChatTurn> messages, bool) const override {
    ASSIGN_OR_RETURN(const size_t first, CheckAlternation(messages, name()));
    std::string out;
    for (size_t i = first; i < messages.size(); ++i) {
      const std::string content(absl::StripAsciiWhitespace(messages[i].content));
      if (messages[i].role == "user") {
        std::string user = content;
        if (i == first && first == 1) {
          user = absl::StrCat("<<SYS>>\n", absl::StripAsciiWhitespace(messages[0].content), "\n<</SYS>>\n\n", content);
        }
        absl::StrAppend(&out, "<s>[INST] ", user, " [/INST]");
      } else {
        absl::StrAppend(&out, " ", content, " </s>");
      }
    }
    return out;
  }
};

// Mistral instruct: <s>[INST] user [/INST]answer</s>[INST] user [/INST]. Mistral has no system role; a
// system message is put before the first user message, separated by a blank line.
class MistralTemplate final : public ChatTemplate {
 public:
  absl::string_view name() const override { return "mistral"; }
  absl::StatusOr<std::string> Render(absl::Span<const ChatTurn> messages, bool) const override {
    ASSIGN_OR_RETURN(const size_t first, CheckAlternation(messages, name()));
    std::string out = "<s>";
    for (size_t i = first; i < messages.size(); ++i) {
      if (messages[i].role == "user") {
        const std::string user = i == first && first == 1
                                     ? absl::StrCat(messages[0].content, "\n\n", messages[i].content)
                                     : messages[i].content;
        absl::StrAppend(&out, "[INST] ", user, " [/INST]");
      } else {
        absl::StrAppend(&out, messages[i].content, "</s>");
      }
    }
    return out;
  }
};

// FastChat's Vicuna v1.1: "system USER: question ASSISTANT: answer</s>USER: question ASSISTANT:".
class VicunaTemplate final : public ChatTemplate {
 public:
  absl::string_view name() const override { return "vicuna"; }
  absl::StatusOr<std::string> Render(absl::Span<const ChatTurn> messages, bool add_generation_prompt) const override {
    ASSIGN_OR_RETURN(const size_t first, CheckAlternation(messages, name()));
    std::string out = first == 1 ? messages[0].content
                                 : "A chat between a curious user and an artificial intelligence assistant. The "
                                   "assistant gives helpful, detailed, and polite answers to the user's questions.";
    out += " ";
    for (size_t i = first; i < messages.size(); ++i) {
      if (messages[i].role == "user") {
        absl::StrAppend(&out, "USER: ", messages[i].content, " ");
      } else {
        absl::StrAppend(&out, "ASSISTANT: ", messages[i].content, "</s>");
      }
    }
    if (add_generation_prompt && messages.back().role == "user") out += "ASSISTANT:";
    return out;
  }
};

// The contents one after another with nothing added: for base models prompted with plain text.
class RawTemplate final : public ChatTemplate {
 public:
  absl::string_view name() const override { return "raw"; }
  absl::StatusOr<std::string> Render(absl::Span<const ChatTurn> messages, bool) const override {
    RETURN_IF_ERROR(CheckRoles(messages, name()));
    std::string out;
    for (const auto& m : messages) out += m.content;
    return out;
  }
};

const std::array<std::unique_ptr<ChatTemplate>, 6>& Templates() {
  static const auto* const templates = new std::array<std::unique_ptr<ChatTemplate>, 6>{
      std::make_unique<ChatMlTemplate>(),  std::make_unique<Llama3Template>(), std::make_unique<Llama2Template>(),
      std::make_unique<MistralTemplate>(), std::make_unique<VicunaTemplate>(), std::make_unique<RawTemplate>()};
  return *templates;
}

}  // namespace

absl::StatusOr<const ChatTemplate*> FindChatTemplate(absl::string_view name) {
  for (const auto& chat_template : Templates()) {
    if (chat_template->name() == name) return chat_template.get();
  }
  return absl::NotFoundError(
      absl::StrCat("unknown chat template '", name, "' (built in: ", absl::StrJoin(ChatTemplateNames(), ", "), ")"));
}

std::vector<std::string> ChatTemplateNames() {
  std::vector<std::string> names;
  for (const auto& chat_template : Templates()) names.emplace_back(chat_template->name());
  return names;
}

}  // namespace llmc::tokenizer
