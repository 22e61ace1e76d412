#include "gateway/openai/chat_input.h"

#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "gateway/openai/json_fields.h"
#include "gateway/openai/openai_error.h"

namespace llmc::gateway {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

// The message fields a chat template may read; others are dropped.
constexpr const char* kForwardedMessageFields[] = {"role",       "content",      "name",
                                                   "tool_calls", "tool_call_id", "reasoning_content"};

absl::Status CheckContentParts(const json& parts, const std::string& param) {
  for (size_t i = 0; i < parts.size(); ++i) {
    const json& part = parts[i];
    const std::string part_param = absl::StrCat(param, "[", i, "]");
    if (!part.is_object()) {
      return InvalidParameter(part_param,
                              absl::StrCat("'", part_param, "' must be an object, not ", DescribeJsonType(part)));
    }
    const FieldReader fields(part, part_param + ".");
    ASSIGN_OR_RETURN(const std::optional<std::string> type, fields.String("type"));
    if (!type.has_value()) return InvalidParameter(fields.Param("type"), "a content part needs a 'type'");
    if (*type != "text") {
      return InvalidParameter(fields.Param("type"), absl::StrCat("content parts of type '", *type,
                                                                 "' are not supported; only 'text' parts are"));
    }
    ASSIGN_OR_RETURN(const std::optional<std::string> text, fields.String("text"));
    if (!text.has_value()) return InvalidParameter(fields.Param("text"), "a text content part needs 'text'");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> MapRole(const FieldReader& fields) {
  ASSIGN_OR_RETURN(const std::optional<std::string> role, fields.String("role"));
  if (!role.has_value()) return InvalidParameter(fields.Param("role"), "every message needs a 'role'");
  if (*role == "developer") return std::string("system");  // OpenAI's newer name for the system role
  if (*role == "system" || *role == "user" || *role == "assistant" || *role == "tool") return *role;
  return InvalidParameter(
      fields.Param("role"),
      absl::StrCat("unknown role '", *role, "'; expected one of system, developer, user, assistant, tool"));
}

absl::Status CheckToolCalls(const FieldReader& fields) {
  const json* calls = fields.Find("tool_calls");
  if (calls == nullptr) return absl::OkStatus();
  if (!calls->is_array()) return fields.WrongType("tool_calls", *calls, "an array");
  for (size_t i = 0; i < calls->size(); ++i) {
    const std::string param = absl::StrCat(fields.Param("tool_calls"), "[", i, "]");
    const json& call = (*calls)[i];
    if (!call.is_object()) {
      return InvalidParameter(param, absl::StrCat("'", param, "' must be an object, not ", DescribeJsonType(call)));
    }
    const FieldReader call_fields(call, param + ".");
    ASSIGN_OR_RETURN(const std::optional<std::string> id, call_fields.String("id"));
    const json* function = call_fields.Find("function");
    if (function == nullptr) return InvalidParameter(call_fields.Param("function"), "a tool call needs a 'function'");
    if (!function->is_object()) return call_fields.WrongType("function", *function, "an object");
    const FieldReader function_fields(*function, call_fields.Param("function") + ".");
    ASSIGN_OR_RETURN(const std::optional<std::string> name, function_fields.String("name"));
    if (!name.has_value()) return InvalidParameter(function_fields.Param("name"), "a tool call needs a name");
    const json* arguments = function_fields.Find("arguments");
    if (arguments != nullptr && !arguments->is_string() && !arguments->is_object()) {
      return function_fields.WrongType("arguments", *arguments, "a string or an object");
    }
  }
  return absl::OkStatus();
}

// As vLLM hands tool calls to templates: `arguments` sent as a JSON string becomes the object it spells
// ("" becomes {}), since templates print it with tojson; an empty tool_calls list is dropped (Llama 3.1's
// template refuses one).
void NormalizeToolCalls(ordered_json& message) {
  const auto calls = message.find("tool_calls");
  if (calls == message.end()) return;
  if (calls->is_array() && calls->empty()) {
    message.erase(calls);
    return;
  }
  for (auto& call : *calls) {
    const auto function = call.find("function");
    if (function == call.end() || !function->is_object()) continue;
    const auto arguments = function->find("arguments");
    if (arguments == function->end() || !arguments->is_string()) continue;
    const std::string& text = arguments->get_ref<const std::string&>();
    if (text.empty()) {
      *arguments = ordered_json::object();
      continue;
    }
    ordered_json parsed = ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (parsed.is_object()) *arguments = std::move(parsed);
  }
}

// Checks one message and returns the fields a template sees, in the client's order, role mapped.
absl::StatusOr<ordered_json> ReadMessage(const json& message, const ordered_json& ordered, size_t index) {
  const std::string param = absl::StrCat("messages[", index, "]");
  if (!message.is_object()) {
    return InvalidParameter(param, absl::StrCat("'", param, "' must be an object, not ", DescribeJsonType(message)));
  }
  const FieldReader fields(message, param + ".");
  ASSIGN_OR_RETURN(const std::string role, MapRole(fields));
  const json* content = fields.Find("content");
  const std::string content_param = fields.Param("content");
  if (content == nullptr) {
    // An assistant turn that only called tools has no content.
    if (role != "assistant") return InvalidParameter(content_param, absl::StrCat("'", content_param, "' is required"));
  } else if (content->is_array()) {
    RETURN_IF_ERROR(CheckContentParts(*content, content_param));
  } else if (!content->is_string()) {
    return fields.WrongType("content", *content, "a string or an array of content parts");
  }
  for (const char* name : {"name", "tool_call_id", "reasoning_content"}) RETURN_IF_ERROR(fields.String(name).status());
  RETURN_IF_ERROR(CheckToolCalls(fields));
  ordered_json forwarded = ordered_json::object();
  for (const auto& [key, value] : ordered.items()) {
    // A null content stays (transformers passes None; templates test it with `is none`).
    if (value.is_null() && key != "content") continue;
    for (const char* allowed : kForwardedMessageFields) {
      if (key == allowed) forwarded[key] = key == "role" ? ordered_json(role) : value;
    }
  }
  NormalizeToolCalls(forwarded);
  return forwarded;
}

absl::Status CheckTools(const FieldReader& fields) {
  const json* tools = fields.Find("tools");
  if (tools != nullptr && !tools->is_array()) return fields.WrongType("tools", *tools, "an array");
  for (size_t i = 0; tools != nullptr && i < tools->size(); ++i) {
    const std::string param = absl::StrCat("tools[", i, "]");
    const json& tool = (*tools)[i];
    if (!tool.is_object()) {
      return InvalidParameter(param, absl::StrCat("'", param, "' must be an object, not ", DescribeJsonType(tool)));
    }
    const FieldReader tool_fields(tool, param + ".");
    ASSIGN_OR_RETURN(const std::optional<std::string> type, tool_fields.String("type"));
    if (type.value_or("function") != "function") {
      return InvalidParameter(tool_fields.Param("type"),
                              absl::StrCat("tools of type '", *type, "' are not supported; only 'function' is"));
    }
    const json* function = tool_fields.Find("function");
    if (function == nullptr) return InvalidParameter(tool_fields.Param("function"), "a tool needs a 'function'");
    if (!function->is_object()) return tool_fields.WrongType("function", *function, "an object");
    ASSIGN_OR_RETURN(const std::optional<std::string> name,
                     FieldReader(*function, tool_fields.Param("function") + ".").String("name"));
    if (!name.has_value()) {
      return InvalidParameter(tool_fields.Param("function") + ".name", "a tool's function needs a name");
    }
  }
  // The template shows the tools to the model; reading calls back out of its text is not done yet, so a
  // request that insists on a call cannot be honoured.
  if (const json* choice = fields.Find("tool_choice"); choice != nullptr) {
    const bool allowed =
        choice->is_string() && (choice->get<std::string>() == "none" || choice->get<std::string>() == "auto");
    if (!allowed) {
      return InvalidParameter("tool_choice",
                              "only 'auto' and 'none' are supported for 'tool_choice': this server does not yet "
                              "turn the model's output into tool calls");
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ParseChatInput(const json& body, const ordered_json& ordered_body, v1::ChatInput& chat) {
  const FieldReader fields(body);
  const json* messages = fields.Find("messages");
  if (messages == nullptr) return InvalidParameter("messages", "'messages' is required");
  if (!messages->is_array()) return fields.WrongType("messages", *messages, "an array");
  if (messages->empty()) return InvalidParameter("messages", "'messages' must hold at least one message");
  const ordered_json& ordered_messages = ordered_body.at("messages");
  ordered_json forwarded = ordered_json::array();
  for (size_t i = 0; i < messages->size(); ++i) {
    ASSIGN_OR_RETURN(ordered_json message, ReadMessage((*messages)[i], ordered_messages.at(i), i));
    forwarded.push_back(std::move(message));
  }
  chat.set_messages_json(DumpJson(forwarded));

  ASSIGN_OR_RETURN(const std::optional<bool> add_generation_prompt, fields.Bool("add_generation_prompt"));
  if (add_generation_prompt.has_value()) chat.set_add_generation_prompt(*add_generation_prompt);
  RETURN_IF_ERROR(CheckTools(fields));
  if (fields.Find("tools") != nullptr && !body.at("tools").empty())
    chat.set_tools_json(DumpJson(ordered_body.at("tools")));
  ASSIGN_OR_RETURN(std::optional<std::string> chat_template, fields.String("chat_template"));
  if (chat_template.has_value()) chat.set_chat_template(*std::move(chat_template));
  if (const json* kwargs = fields.Find("chat_template_kwargs"); kwargs != nullptr) {
    if (!kwargs->is_object()) return fields.WrongType("chat_template_kwargs", *kwargs, "an object");
    chat.set_chat_template_kwargs_json(DumpJson(ordered_body.at("chat_template_kwargs")));
  }
  return absl::OkStatus();
}

}  // namespace llmc::gateway
