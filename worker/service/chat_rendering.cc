#include "worker/service/chat_rendering.h"

#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/json_shape.h"
#include "common/request_limits.h"
#include "common/status_macros.h"
#include "worker/jinja/template.h"

namespace llmc::worker {
namespace {

using nlohmann::ordered_json;

// A request over gRPC need not have come through the gateway: its JSON fields meet the same depth and key
// limits as the gateway's body before they are parsed (a deep text would make the parse, the copies and the
// template recurse that deep; an object with many keys makes the order-keeping parse quadratic).
absl::StatusOr<ordered_json> ParseJsonField(const std::string& text, absl::string_view field,
                                            size_t max_depth = limits::kMaxJsonDepth) {
  RETURN_IF_ERROR(CheckNoNulByte(text, absl::StrCat("chat.", field)));
  RETURN_IF_ERROR(CheckJsonShapeLimits(text, absl::StrCat("chat.", field), max_depth));
  try {
    return ordered_json::parse(text);
  } catch (const ordered_json::exception& error) {
    return absl::InvalidArgumentError(absl::StrCat("chat.", field, " is not valid JSON: ", error.what()));
  }
}

absl::StatusOr<ordered_json> Messages(const v1::ChatInput& chat) {
  if (!chat.messages_json().empty()) {
    ASSIGN_OR_RETURN(ordered_json messages,
                     ParseJsonField(chat.messages_json(), "messages_json", limits::kMaxMessagesJsonDepth));
    if (!messages.is_array()) return absl::InvalidArgumentError("chat.messages_json must be a JSON array");
    for (const auto& message : messages) {
      if (!message.is_object() || !message.contains("role") || !message["role"].is_string()) {
        return absl::InvalidArgumentError("chat.messages_json: every message must be an object with a role");
      }
    }
    return messages;
  }
  ordered_json messages = ordered_json::array();
  for (const auto& message : chat.messages()) {
    ordered_json entry = {{"role", message.role()}, {"content", message.content()}};
    if (!message.name().empty()) entry["name"] = message.name();
    messages.push_back(std::move(entry));
  }
  return messages;
}

// A message's text for a built-in template: the string, or its text parts joined by newlines (as vLLM
// flattens them for string-based templates).
std::string TextOf(const ordered_json& message) {
  const auto content = message.find("content");
  if (content == message.end() || content->is_null()) return "";
  if (content->is_string()) return content->get<std::string>();
  std::vector<std::string> texts;
  for (const auto& part : *content) {
    if (part.is_object() && part.contains("text") && part["text"].is_string()) {
      texts.push_back(part["text"].get<std::string>());
    }
  }
  return absl::StrJoin(texts, "\n");
}

// For templates that expect content as a string: text parts joined by newlines.
void FlattenContentParts(ordered_json& messages) {
  for (auto& message : messages) {
    const auto content = message.find("content");
    if (content != message.end() && content->is_array()) *content = TextOf(message);
  }
}

absl::StatusOr<std::string> RenderJinja(const jinja::Template& chat_template, const v1::ChatInput& chat,
                                        ordered_json messages, bool add_generation_prompt, const ServedModel& model) {
  ordered_json context = model.special_tokens;
  context["messages"] = std::move(messages);
  context["tools"] = nullptr;
  if (!chat.tools_json().empty()) {
    ASSIGN_OR_RETURN(context["tools"], ParseJsonField(chat.tools_json(), "tools_json"));
  }
  context["add_generation_prompt"] = add_generation_prompt;
  for (const auto& [key, value] : model.default_chat_template_kwargs.items()) {
    if (key == "messages" || key == "tools" || key == "add_generation_prompt") continue;
    context[key] = value;
  }
  if (!chat.chat_template_kwargs_json().empty()) {
    ASSIGN_OR_RETURN(const ordered_json kwargs,
                     ParseJsonField(chat.chat_template_kwargs_json(), "chat_template_kwargs_json"));
    if (!kwargs.is_object()) return absl::InvalidArgumentError("chat_template_kwargs must be a JSON object");
    for (const auto& [key, value] : kwargs.items()) {
      // The request's own fields are not for the kwargs to replace.
      if (key == "messages" || key == "tools" || key == "add_generation_prompt") continue;
      context[key] = value;
    }
  }
  absl::StatusOr<std::string> text = chat_template.Render(context, {});
  if (text.ok()) return text;
  if (jinja::IsRaisedByTemplate(text.status())) return absl::InvalidArgumentError(text.status().message());
  return absl::InvalidArgumentError(absl::StrCat("chat template: ", text.status().message()));
}

absl::StatusOr<std::string> RenderBuiltIn(const tokenizer::ChatTemplate& chat_template, const v1::ChatInput& chat,
                                          const ordered_json& messages, bool add_generation_prompt,
                                          const ServedModel& model) {
  const auto refuse = [&](absl::string_view what) {
    return absl::InvalidArgumentError(absl::StrCat(what, " need the model's own Jinja chat template; ", model.name(),
                                                   " uses the built-in '", chat_template.name(),
                                                   "' template (pass 'chat_template' with the request)"));
  };
  if (!chat.tools_json().empty()) return refuse("tools");
  std::vector<tokenizer::ChatTurn> turns;
  turns.reserve(messages.size());
  for (const auto& message : messages) {
    if (message.contains("tool_calls") && !message["tool_calls"].empty()) return refuse("tool calls");
    turns.push_back({message["role"].get<std::string>(), TextOf(message)});
  }
  absl::StatusOr<std::string> text = chat_template.Render(turns, add_generation_prompt);
  if (!text.ok()) return Annotate(text.status(), "chat");
  return text;
}

}  // namespace

absl::StatusOr<std::string> RenderChat(const v1::ChatInput& chat, const ServedModel& model) {
  ASSIGN_OR_RETURN(ordered_json messages, Messages(chat));
  const bool add_generation_prompt = !chat.has_add_generation_prompt() || chat.add_generation_prompt();
  if (!chat.chat_template().empty()) {
    if (!model.trust_request_chat_template) {
      return absl::InvalidArgumentError(
          "this worker does not render a request's own chat_template (start it with "
          "--trust_request_chat_template=true to allow that)");
    }
    absl::StatusOr<std::unique_ptr<jinja::Template>> request_template =
        jinja::Template::Parse(chat.chat_template(), {});
    if (!request_template.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("chat_template: ", request_template.status().message()));
    }
    if (!TemplateReadsContentParts(chat.chat_template())) FlattenContentParts(messages);
    return RenderJinja(**request_template, chat, std::move(messages), add_generation_prompt, model);
  }
  if (model.jinja_template != nullptr) {
    if (!model.template_reads_content_parts) FlattenContentParts(messages);
    return RenderJinja(*model.jinja_template, chat, std::move(messages), add_generation_prompt, model);
  }
  if (model.chat_template != nullptr) {
    return RenderBuiltIn(*model.chat_template, chat, messages, add_generation_prompt, model);
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "model ", model.name(), " has no chat template; send a prompt, prompt_token_ids or a chat_template"));
}

}  // namespace llmc::worker
