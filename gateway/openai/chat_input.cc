#include "gateway/openai/chat_input.h"

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/json_shape.h"
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

// vLLM's newer name for an assistant turn's reasoning; templates read reasoning_content.
void ForwardReasoning(const ordered_json& message, ordered_json& forwarded) {
  if (forwarded.contains("reasoning_content")) return;
  const auto reasoning = message.find("reasoning");
  if (reasoning != message.end() && reasoning->is_string()) forwarded["reasoning_content"] = *reasoning;
}

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
// template refuses one). The JSON inside the string is held to the body's own depth and key limits.
absl::Status NormalizeToolCalls(ordered_json& message, const std::string& param) {
  const auto calls = message.find("tool_calls");
  if (calls == message.end()) return absl::OkStatus();
  if (calls->is_array() && calls->empty()) {
    message.erase(calls);
    return absl::OkStatus();
  }
  for (size_t i = 0; i < calls->size(); ++i) {
    ordered_json& call = (*calls)[i];
    const auto function = call.find("function");
    if (function == call.end() || !function->is_object()) continue;
    const auto arguments = function->find("arguments");
    if (arguments == function->end() || !arguments->is_string()) continue;
    const std::string& text = arguments->get_ref<const std::string&>();
    if (text.empty()) {
      *arguments = ordered_json::object();
      continue;
    }
    RETURN_IF_ERROR(CheckJsonShape(text, absl::StrCat(param, ".tool_calls[", i, "].function.arguments"),
                                   "a tool call's arguments"));
    if (FindNulByte(text).has_value()) continue;  // not JSON, so it stays a string
    ordered_json parsed = ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (parsed.is_object()) *arguments = std::move(parsed);
  }
  return absl::OkStatus();
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
  for (const char* name : {"name", "tool_call_id", "reasoning_content", "reasoning"}) {
    RETURN_IF_ERROR(fields.String(name).status());
  }
  RETURN_IF_ERROR(CheckToolCalls(fields));
  ordered_json forwarded = ordered_json::object();
  for (const auto& [key, value] : ordered.items()) {
    // A null content stays (transformers passes None; templates test it with `is none`).
    if (value.is_null() && key != "content") continue;
    for (const char* allowed : kForwardedMessageFields) {
      if (key == allowed) forwarded[key] = key == "role" ? ordered_json(role) : value;
    }
  }
  // OpenAI's tool-only assistant turn has a null (or no) content; templates test it as a string (Qwen3's
  // `'</think>' in message.content`), so it reaches them as "" (as vLLM hands it over).
  if (role == "assistant" && (!forwarded.contains("content") || forwarded["content"].is_null())) {
    forwarded["content"] = "";
  }
  ForwardReasoning(ordered, forwarded);
  RETURN_IF_ERROR(NormalizeToolCalls(forwarded, param));
  return forwarded;
}

// The function tools, in the client's order and spelling; tools of other types (web_search, custom, ...) are
// left out, not refused, as OpenAI-compatible servers do (Codex CLI sends some).
absl::StatusOr<ordered_json> ReadTools(const FieldReader& fields, const ordered_json& ordered_body,
                                       std::vector<std::string>& names, std::vector<uint32_t>& positions) {
  ordered_json functions = ordered_json::array();
  const json* tools = fields.Find("tools");
  if (tools == nullptr || tools->is_null()) return functions;
  if (!tools->is_array()) return fields.WrongType("tools", *tools, "an array");
  for (size_t i = 0; i < tools->size(); ++i) {
    const std::string param = absl::StrCat("tools[", i, "]");
    const json& tool = (*tools)[i];
    if (!tool.is_object()) {
      return InvalidParameter(param, absl::StrCat("'", param, "' must be an object, not ", DescribeJsonType(tool)));
    }
    const FieldReader tool_fields(tool, param + ".");
    ASSIGN_OR_RETURN(const std::optional<std::string> type, tool_fields.String("type"));
    if (type.value_or("function") != "function") continue;
    const json* function = tool_fields.Find("function");
    if (function == nullptr) return InvalidParameter(tool_fields.Param("function"), "a tool needs a 'function'");
    if (!function->is_object()) return tool_fields.WrongType("function", *function, "an object");
    const FieldReader function_fields(*function, tool_fields.Param("function") + ".");
    ASSIGN_OR_RETURN(const std::optional<std::string> name, function_fields.String("name"));
    if (!name.has_value() || name->empty()) {
      return InvalidParameter(function_fields.Param("name"), "a tool's function needs a name");
    }
    if (const json* parameters = function_fields.Find("parameters");
        parameters != nullptr && !parameters->is_object()) {
      return function_fields.WrongType("parameters", *parameters, "an object (a JSON schema)");
    }
    RETURN_IF_ERROR(function_fields.Bool("strict").status());
    names.push_back(*name);
    positions.push_back(static_cast<uint32_t>(i));
    functions.push_back(ordered_body.at("tools").at(i));
  }
  return functions;
}

// "none", "auto", "required" or {"type": "function", "function": {"name": ...}}; a named function must be
// among the tools.
absl::Status ReadToolChoice(const FieldReader& fields, const std::vector<std::string>& names, v1::ChatInput& chat) {
  const json* choice = fields.Find("tool_choice");
  if (choice == nullptr || choice->is_null()) return absl::OkStatus();
  if (choice->is_string()) {
    const std::string& value = choice->get_ref<const std::string&>();
    if (value == "none") {
      chat.set_tool_choice(v1::TOOL_CHOICE_NONE);
    } else if (value == "auto") {
      chat.set_tool_choice(v1::TOOL_CHOICE_AUTO);
    } else if (value == "required") {
      chat.set_tool_choice(v1::TOOL_CHOICE_REQUIRED);
    } else {
      return InvalidParameter("tool_choice", absl::StrCat("unknown tool_choice '", value,
                                                          "'; expected none, auto, required or a named function"));
    }
  } else if (choice->is_object()) {
    const FieldReader choice_fields(*choice, "tool_choice.");
    ASSIGN_OR_RETURN(const std::optional<std::string> type, choice_fields.String("type"));
    if (type.value_or("function") != "function") {
      return InvalidParameter(choice_fields.Param("type"),
                              absl::StrCat("tool_choice of type '", *type, "' is not supported; only 'function' is"));
    }
    const json* function = choice_fields.Find("function");
    if (function == nullptr || !function->is_object()) {
      return InvalidParameter(choice_fields.Param("function"), "a named tool_choice needs a 'function' object");
    }
    ASSIGN_OR_RETURN(const std::optional<std::string> name,
                     FieldReader(*function, "tool_choice.function.").String("name"));
    if (!name.has_value()) return InvalidParameter("tool_choice.function.name", "a named tool_choice needs a name");
    chat.set_tool_choice(v1::TOOL_CHOICE_NAMED);
    chat.set_tool_choice_name(*name);
  } else {
    return fields.WrongType("tool_choice", *choice, "a string or an object");
  }
  const bool forced = chat.tool_choice() == v1::TOOL_CHOICE_REQUIRED || chat.tool_choice() == v1::TOOL_CHOICE_NAMED;
  if (forced && names.empty()) {
    return InvalidParameter("tool_choice", "a required or named tool_choice needs at least one function in 'tools'");
  }
  if (chat.tool_choice() == v1::TOOL_CHOICE_NAMED &&
      std::find(names.begin(), names.end(), chat.tool_choice_name()) == names.end()) {
    return InvalidParameter(
        "tool_choice.function.name",
        absl::StrCat("tool_choice names the function '", chat.tool_choice_name(), "', which is not among the tools"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ParseChatInput(const json& body, const ordered_json& ordered_body, v1::ChatInput& chat,
                            std::vector<uint32_t>* tool_positions) {
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
  std::vector<std::string> tool_names;
  std::vector<uint32_t> positions;
  ASSIGN_OR_RETURN(const ordered_json tools, ReadTools(fields, ordered_body, tool_names, positions));
  if (tool_positions != nullptr) *tool_positions = std::move(positions);
  if (!tools.empty()) chat.set_tools_json(DumpJson(tools));
  RETURN_IF_ERROR(ReadToolChoice(fields, tool_names, chat));
  ASSIGN_OR_RETURN(const std::optional<bool> parallel_tool_calls, fields.Bool("parallel_tool_calls"));
  if (parallel_tool_calls.has_value()) chat.set_parallel_tool_calls(*parallel_tool_calls);
  // SGLang's separate_reasoning: false leaves reasoning inside the content.
  ASSIGN_OR_RETURN(const std::optional<bool> separate_reasoning, fields.Bool("separate_reasoning"));
  if (separate_reasoning.has_value()) chat.set_separate_reasoning(*separate_reasoning);
  ASSIGN_OR_RETURN(std::optional<std::string> chat_template, fields.String("chat_template"));
  if (chat_template.has_value()) chat.set_chat_template(*std::move(chat_template));
  // OpenAI's reasoning_effort reaches the template; the client's own chat_template_kwargs win over it.
  ordered_json kwargs = ordered_json::object();
  ASSIGN_OR_RETURN(const std::optional<std::string> effort, fields.String("reasoning_effort"));
  if (effort.has_value()) RETURN_IF_ERROR(AddReasoningEffort(*effort, "reasoning_effort", kwargs));
  if (const json* given = fields.Find("chat_template_kwargs"); given != nullptr) {
    if (!given->is_object()) return fields.WrongType("chat_template_kwargs", *given, "an object");
    for (const auto& [key, value] : ordered_body.at("chat_template_kwargs").items()) kwargs[key] = value;
  }
  if (!kwargs.empty()) chat.set_chat_template_kwargs_json(DumpJson(kwargs));
  return absl::OkStatus();
}

absl::Status AddReasoningEffort(const std::string& effort, const std::string& param, ordered_json& kwargs) {
  if (effort == "none" || effort == "minimal") {
    kwargs["enable_thinking"] = false;
  } else if (effort == "low" || effort == "medium" || effort == "high") {
    kwargs["reasoning_effort"] = effort;
  } else if (effort == "xhigh") {
    kwargs["reasoning_effort"] = "high";
  } else {
    return InvalidParameter(
        param, absl::StrCat("'", param, "' must be none, minimal, low, medium, high or xhigh, got '", effort, "'"));
  }
  return absl::OkStatus();
}

}  // namespace llmc::gateway
