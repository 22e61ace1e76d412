#include "gateway/openai/responses_request.h"

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "common/status_macros.h"
#include "gateway/openai/chat_input.h"
#include "gateway/openai/json_fields.h"
#include "gateway/openai/openai_error.h"

namespace llmc::gateway {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

// Fields that mean the same in a chat body: OpenAI's sampling parameters and user, and the llmc/vLLM
// sampling extensions. They are copied over as they are, and the chat parser checks them.
constexpr const char* kSharedFields[] = {"temperature",
                                         "top_p",
                                         "stream",
                                         "user",
                                         "top_k",
                                         "min_p",
                                         "seed",
                                         "stop",
                                         "presence_penalty",
                                         "frequency_penalty",
                                         "repetition_penalty"};

// OpenAI's bounds on `metadata`.
constexpr size_t kMaxMetadataKeys = 16;
constexpr size_t kMaxMetadataKeyLength = 64;
constexpr size_t kMaxMetadataValueLength = 512;

absl::Status NotAnObject(const std::string& param, const json& value) {
  return InvalidParameter(param, absl::StrCat("'", param, "' must be an object, not ", DescribeJsonType(value)));
}

// A required string field of an input item or tool.
absl::StatusOr<std::string> RequiredString(const FieldReader& fields, std::string_view name, bool non_empty = true) {
  ASSIGN_OR_RETURN(std::optional<std::string> value, fields.String(name));
  const std::string param = fields.Param(name);
  if (!value.has_value()) return InvalidParameter(param, absl::StrCat("'", param, "' is required"));
  if (non_empty && value->empty()) return InvalidParameter(param, absl::StrCat("'", param, "' must not be empty"));
  return *std::move(value);
}

// --- what a stateless server cannot do ---

absl::Status RefuseStatefulFields(const FieldReader& fields) {
  ASSIGN_OR_RETURN(const std::optional<bool> store, fields.Bool("store"));
  if (store.value_or(false)) {
    return InvalidParameter("store",
                            "this server keeps no responses: 'store' must be false or left out (an answer cannot be "
                            "retrieved or continued later; send the earlier turns in 'input' instead)");
  }
  if (fields.Find("previous_response_id") != nullptr) {
    return InvalidParameter("previous_response_id",
                            "this server keeps no responses, so 'previous_response_id' cannot be resolved; send the "
                            "earlier turns, with the output items they produced, in 'input' instead");
  }
  if (fields.Find("conversation") != nullptr) {
    return InvalidParameter("conversation",
                            "this server keeps no conversations, so 'conversation' is not supported; send the "
                            "earlier turns in 'input' instead");
  }
  ASSIGN_OR_RETURN(const std::optional<bool> background, fields.Bool("background"));
  if (background.value_or(false)) {
    return InvalidParameter("background",
                            "'background': true is not supported: this server keeps no responses to poll later; use "
                            "'stream': true for long answers");
  }
  if (fields.Find("prompt") != nullptr) {
    return InvalidParameter("prompt",
                            "'prompt' (a stored prompt template) is not supported by this server; send "
                            "'instructions' and 'input' instead");
  }
  return absl::OkStatus();
}

// Options that ask for more than the chat path can give are refused; those that ask for nothing are not.
absl::Status RefuseUnsupportedOptions(const FieldReader& fields, bool stream) {
  ASSIGN_OR_RETURN(const std::optional<std::string> truncation, fields.String("truncation"));
  if (truncation.has_value() && *truncation == "auto") {
    return InvalidParameter("truncation",
                            "'truncation': 'auto' is not supported: this server never drops input items, and refuses "
                            "an input longer than the model's context; send 'disabled' or leave it out");
  }
  if (truncation.has_value() && *truncation != "disabled") {
    return InvalidParameter("truncation",
                            absl::StrCat("'truncation' must be 'auto' or 'disabled', got '", *truncation, "'"));
  }
  if (const json* include = fields.Find("include"); include != nullptr) {
    if (!include->is_array()) return fields.WrongType("include", *include, "an array of strings");
    for (const json& value : *include) {
      if (!value.is_string()) return fields.WrongType("include", *include, "an array of strings");
      // Reasoning items carry their text in `content`, and a client hands them back in `input` as they are:
      // nothing encrypted is needed to carry reasoning over statelessly, so asking for it costs nothing.
      if (value.get_ref<const std::string&>() == "reasoning.encrypted_content") continue;
      return InvalidParameter("include", absl::StrCat("'include' value '", value.get_ref<const std::string&>(),
                                                      "' is not supported by this server; it may hold only "
                                                      "'reasoning.encrypted_content'"));
    }
  }
  ASSIGN_OR_RETURN(const std::optional<int64_t> top_logprobs, fields.Int("top_logprobs", 0, 20));
  if (top_logprobs.value_or(0) > 0) {
    return InvalidParameter("top_logprobs",
                            "'top_logprobs' is not supported on /v1/responses; /v1/chat/completions returns token "
                            "log probabilities with 'logprobs'");
  }
  // Keys for OpenAI's prompt cache, abuse checks and billing tiers: nothing here depends on them.
  for (const char* name : {"prompt_cache_key", "safety_identifier", "service_tier"}) {
    RETURN_IF_ERROR(fields.String(name).status());
  }
  // A bound on calls of built-in tools, of which this server has none.
  RETURN_IF_ERROR(fields.Int("max_tool_calls", 0, std::numeric_limits<int32_t>::max()).status());
  if (const json* options = fields.Find("stream_options"); options != nullptr) {
    if (!options->is_object()) return fields.WrongType("stream_options", *options, "an object");
    if (!stream) return InvalidParameter("stream_options", "'stream_options' is only allowed when 'stream' is true");
    // Obfuscation pads events against length side channels; this server sends none, so either value is met.
    RETURN_IF_ERROR(FieldReader(*options, "stream_options.").Bool("include_obfuscation").status());
  }
  return absl::OkStatus();
}

// --- input ---

// The texts of a list of content parts: input_text and output_text parts (and `text`, as chat names them)
// carry `text`, refusal parts `refusal`. Images, files and audio are refused: the models served take text.
absl::StatusOr<std::vector<std::string>> ReadTextParts(const json& parts, const std::string& param) {
  std::vector<std::string> texts;
  for (size_t i = 0; i < parts.size(); ++i) {
    const std::string part_param = absl::StrCat(param, "[", i, "]");
    if (!parts[i].is_object()) return NotAnObject(part_param, parts[i]);
    const FieldReader fields(parts[i], part_param + ".");
    ASSIGN_OR_RETURN(const std::string type, RequiredString(fields, "type"));
    if (type == "input_text" || type == "output_text" || type == "text") {
      ASSIGN_OR_RETURN(std::string text, RequiredString(fields, "text", /*non_empty=*/false));
      texts.push_back(std::move(text));
    } else if (type == "refusal") {
      ASSIGN_OR_RETURN(std::string refusal, RequiredString(fields, "refusal", /*non_empty=*/false));
      texts.push_back(std::move(refusal));
    } else if (type == "input_image" || type == "input_file" || type == "input_audio") {
      return InvalidParameter(fields.Param("type"), absl::StrCat("content parts of type '", type,
                                                                 "' are not supported; this server takes text only "
                                                                 "('input_text' and 'output_text' parts)"));
    } else {
      return InvalidParameter(fields.Param("type"), absl::StrCat("unknown content part type '", type,
                                                                 "'; expected 'input_text' or 'output_text'"));
    }
  }
  return texts;
}

// Chat content for parts: one part as a plain string, several as chat text parts.
ordered_json ChatContent(const std::vector<std::string>& texts) {
  if (texts.size() == 1) return texts.front();
  ordered_json parts = ordered_json::array();
  for (const std::string& text : texts) parts.push_back(ordered_json{{"type", "text"}, {"text", text}});
  return parts;
}

// Turns `input` into chat messages. A function_call joins the assistant message just before it (its text,
// or earlier calls), so a turn that said something and called tools is one chat message, as in Chat
// Completions; each function_call_output becomes a tool message; a reasoning item's text becomes the
// reasoning_content of the assistant message that follows it (and is dropped when none does).
class InputReader {
 public:
  InputReader(ordered_json& messages, ResponsesParamMap& params) : messages_(messages), params_(params) {}

  absl::Status Read(const FieldReader& body) {
    const json* input = body.Find("input");
    if (input == nullptr) return InvalidParameter("input", "'input' is required: a string or a list of input items");
    if (input->is_string()) {
      Push(ordered_json{{"role", "user"}, {"content", input->get<std::string>()}}, "input");
      return absl::OkStatus();
    }
    if (!input->is_array()) return body.WrongType("input", *input, "a string or an array of input items");
    if (input->empty()) return InvalidParameter("input", "'input' must hold at least one item");
    for (size_t i = 0; i < input->size(); ++i) RETURN_IF_ERROR(ReadItem((*input)[i], i));
    return absl::OkStatus();
  }

 private:
  absl::Status ReadItem(const json& item, size_t index) {
    const std::string param = absl::StrCat("input[", index, "]");
    if (!item.is_object()) return NotAnObject(param, item);
    const FieldReader fields(item, param + ".");
    ASSIGN_OR_RETURN(const std::optional<std::string> type, fields.String("type"));
    if (!type.has_value() && fields.Find("role") == nullptr) {
      return InvalidParameter(fields.Param("type"), "an input item needs a 'type' (or a 'role', for a message)");
    }
    if (!type.has_value() || *type == "message") return ReadMessage(fields, param);
    if (*type == "function_call") return ReadFunctionCall(fields, param);
    if (*type == "function_call_output") return ReadFunctionCallOutput(fields, param);
    if (*type == "reasoning") return ReadReasoning(fields);
    if (*type == "item_reference") {
      return InvalidParameter(fields.Param("type"),
                              "'item_reference' items need stored items, which this server does not keep; send the "
                              "item itself");
    }
    return InvalidParameter(fields.Param("type"),
                            absl::StrCat("input items of type '", *type,
                                         "' are not supported; this server takes 'message', 'function_call', "
                                         "'function_call_output' and 'reasoning' items"));
  }

  absl::Status ReadMessage(const FieldReader& fields, const std::string& param) {
    ASSIGN_OR_RETURN(const std::string role, RequiredString(fields, "role"));
    if (role != "user" && role != "assistant" && role != "system" && role != "developer") {
      return InvalidParameter(fields.Param("role"),
                              absl::StrCat("unknown role '", role, "'; expected user, assistant, system or developer"));
    }
    const json* content = fields.Find("content");
    const std::string content_param = fields.Param("content");
    if (content == nullptr) return InvalidParameter(content_param, absl::StrCat("'", content_param, "' is required"));
    ordered_json message{{"role", role}};
    if (content->is_string()) {
      message["content"] = content->get<std::string>();
    } else if (content->is_array()) {
      ASSIGN_OR_RETURN(const std::vector<std::string> texts, ReadTextParts(*content, content_param));
      if (role == "assistant") {
        // The output_text parts of one answer are pieces of one text.
        std::string text;
        for (const std::string& part : texts) text += part;
        message["content"] = std::move(text);
      } else {
        message["content"] = ChatContent(texts);
      }
    } else {
      return fields.WrongType("content", *content, "a string or an array of content parts");
    }
    if (role == "assistant") {
      TakeReasoning(message);
      Push(std::move(message), param);
      last_is_assistant_ = true;
    } else {
      EndTurn();
      Push(std::move(message), param);
    }
    return absl::OkStatus();
  }

  absl::Status ReadFunctionCall(const FieldReader& fields, const std::string& param) {
    ASSIGN_OR_RETURN(const std::string call_id, RequiredString(fields, "call_id"));
    ASSIGN_OR_RETURN(const std::string name, RequiredString(fields, "name"));
    ASSIGN_OR_RETURN(const std::string arguments, RequiredString(fields, "arguments", /*non_empty=*/false));
    if (!last_is_assistant_) {
      // A turn that only called tools: its content is empty (templates print or test it, and a null would
      // print as "None" in some).
      ordered_json message{{"role", "assistant"}, {"content", ""}};
      TakeReasoning(message);
      Push(std::move(message), param);
      last_is_assistant_ = true;
    }
    ordered_json& message = messages_.back();
    if (!message.contains("tool_calls")) message["tool_calls"] = ordered_json::array();
    message["tool_calls"].push_back(ordered_json{
        {"id", call_id}, {"type", "function"}, {"function", ordered_json{{"name", name}, {"arguments", arguments}}}});
    params_.call_sources.back().push_back(param);
    return absl::OkStatus();
  }

  absl::Status ReadFunctionCallOutput(const FieldReader& fields, const std::string& param) {
    ASSIGN_OR_RETURN(const std::string call_id, RequiredString(fields, "call_id"));
    const json* output = fields.Find("output");
    const std::string output_param = fields.Param("output");
    if (output == nullptr) return InvalidParameter(output_param, absl::StrCat("'", output_param, "' is required"));
    ordered_json message{{"role", "tool"}, {"tool_call_id", call_id}};
    if (output->is_string()) {
      message["content"] = output->get<std::string>();
    } else if (output->is_array()) {
      ASSIGN_OR_RETURN(const std::vector<std::string> texts, ReadTextParts(*output, output_param));
      message["content"] = ChatContent(texts);
    } else {
      return fields.WrongType("output", *output, "a string or an array of content parts");
    }
    EndTurn();
    Push(std::move(message), param);
    return absl::OkStatus();
  }

  // The reasoning's text (its reasoning_text parts) waits for the assistant message after it. The summary is
  // not reasoning the model wrote, so it is not shown to it; encrypted_content is never produced here.
  absl::Status ReadReasoning(const FieldReader& fields) {
    std::string text;
    if (const json* content = fields.Find("content"); content != nullptr) {
      if (!content->is_array()) return fields.WrongType("content", *content, "an array of reasoning_text parts");
      for (size_t i = 0; i < content->size(); ++i) {
        const std::string part_param = absl::StrCat(fields.Param("content"), "[", i, "]");
        if (!(*content)[i].is_object()) return NotAnObject(part_param, (*content)[i]);
        const FieldReader part((*content)[i], part_param + ".");
        ASSIGN_OR_RETURN(const std::string type, RequiredString(part, "type"));
        if (type != "reasoning_text") {
          return InvalidParameter(
              part.Param("type"),
              absl::StrCat("a reasoning item's content parts must be 'reasoning_text', not '", type, "'"));
        }
        ASSIGN_OR_RETURN(const std::string part_text, RequiredString(part, "text", /*non_empty=*/false));
        text += part_text;
      }
    }
    if (const json* summary = fields.Find("summary"); summary != nullptr && !summary->is_array()) {
      return fields.WrongType("summary", *summary, "an array");
    }
    RETURN_IF_ERROR(fields.String("encrypted_content").status());
    last_is_assistant_ = false;  // what follows is a new step of the turn
    if (!text.empty()) pending_reasoning_ += text;
    return absl::OkStatus();
  }

  void TakeReasoning(ordered_json& message) {
    if (!pending_reasoning_.empty()) message["reasoning_content"] = std::move(pending_reasoning_);
    pending_reasoning_.clear();
  }

  void EndTurn() {
    last_is_assistant_ = false;
    pending_reasoning_.clear();
  }

  void Push(ordered_json message, const std::string& source) {
    messages_.push_back(std::move(message));
    params_.message_sources.push_back(source);
    params_.call_sources.emplace_back();
  }

  ordered_json& messages_;
  ResponsesParamMap& params_;
  bool last_is_assistant_ = false;  // the last message is an assistant turn later function calls join
  std::string pending_reasoning_;
};

// --- tools ---

// Function tools, from the Responses shape ({type, name, description, parameters, strict}) to the chat shape
// ({type, function: {...}}), in the client's key order. Tools of other types (web_search, file_search, mcp,
// custom, ...) are built into OpenAI's service; none exist here, and they are left out, not refused.
absl::Status ReadTools(const FieldReader& fields, const ordered_json& ordered_body, ResponsesTranslation& out,
                       ordered_json& echo_tools) {
  echo_tools = ordered_json::array();
  const json* tools = fields.Find("tools");
  if (tools == nullptr) return absl::OkStatus();
  if (!tools->is_array()) return fields.WrongType("tools", *tools, "an array");
  ordered_json chat_tools = ordered_json::array();
  for (size_t i = 0; i < tools->size(); ++i) {
    const std::string param = absl::StrCat("tools[", i, "]");
    const json& tool = (*tools)[i];
    if (!tool.is_object()) return NotAnObject(param, tool);
    const FieldReader tool_fields(tool, param + ".");
    ASSIGN_OR_RETURN(const std::string type, RequiredString(tool_fields, "type"));
    if (type != "function") continue;
    // A tool in the Chat Completions shape ({"type": "function", "function": {...}}) is taken as it is.
    const json* nested = tool_fields.Find("function");
    const bool chat_shape = nested != nullptr && nested->is_object() && tool_fields.Find("name") == nullptr;
    const FieldReader spec_fields(chat_shape ? *nested : tool, chat_shape ? param + ".function." : param + ".");
    ASSIGN_OR_RETURN(const std::string name, RequiredString(spec_fields, "name"));
    ASSIGN_OR_RETURN(const std::optional<std::string> description, spec_fields.String("description"));
    if (const json* parameters = spec_fields.Find("parameters"); parameters != nullptr && !parameters->is_object()) {
      return spec_fields.WrongType("parameters", *parameters, "an object (a JSON schema)");
    }
    ASSIGN_OR_RETURN(const std::optional<bool> strict, spec_fields.Bool("strict"));
    const ordered_json& ordered_tool = ordered_body.at("tools").at(i);
    const ordered_json& ordered_spec = chat_shape ? ordered_tool.at("function") : ordered_tool;
    ordered_json function = ordered_json::object();
    for (const auto& [key, value] : ordered_spec.items()) {
      if (key != "type") function[key] = value;
    }
    chat_tools.push_back(ordered_json{{"type", "function"}, {"function", std::move(function)}});
    out.params.tool_sources.push_back(i);
    ordered_json echo{{"type", "function"}, {"name", name}};
    if (description.has_value()) echo["description"] = *description;
    echo["parameters"] =
        spec_fields.Find("parameters") != nullptr ? ordered_spec.at("parameters") : ordered_json(nullptr);
    // As in Chat Completions, a tool's arguments are constrained to its schema only when it says strict: true.
    echo["strict"] = strict.value_or(false);
    echo_tools.push_back(std::move(echo));
  }
  if (!chat_tools.empty()) out.chat_body["tools"] = std::move(chat_tools);
  return absl::OkStatus();
}

// "auto", "none", "required" or {"type": "function", "name": ...}; returns the value the answer echoes.
absl::StatusOr<ordered_json> ReadToolChoice(const FieldReader& fields, const ordered_json& ordered_body,
                                            ResponsesTranslation& out) {
  const json* choice = fields.Find("tool_choice");
  if (choice == nullptr) return ordered_json("auto");
  if (choice->is_string()) {
    const std::string& value = choice->get_ref<const std::string&>();
    if (value != "auto" && value != "none" && value != "required") {
      return InvalidParameter("tool_choice", absl::StrCat("unknown tool_choice '", value,
                                                          "'; expected auto, none, required or a function"));
    }
    out.chat_body["tool_choice"] = value;
  } else if (choice->is_object()) {
    const FieldReader choice_fields(*choice, "tool_choice.");
    ASSIGN_OR_RETURN(const std::string type, RequiredString(choice_fields, "type"));
    if (type != "function") {
      return InvalidParameter("tool_choice.type",
                              absl::StrCat("tool_choice of type '", type,
                                           "' is not supported; this server has no built-in tools, and takes "
                                           "auto, none, required or {\"type\": \"function\", \"name\": ...}"));
    }
    // {"type": "function", "function": {"name": ...}}, the Chat Completions shape, is taken too.
    const json* nested = choice_fields.Find("function");
    const bool chat_shape = nested != nullptr && nested->is_object() && choice_fields.Find("name") == nullptr;
    ASSIGN_OR_RETURN(
        const std::string name,
        RequiredString(chat_shape ? FieldReader(*nested, "tool_choice.function.") : choice_fields, "name"));
    out.chat_body["tool_choice"] = ordered_json{{"type", "function"}, {"function", ordered_json{{"name", name}}}};
  } else {
    return fields.WrongType("tool_choice", *choice, "a string or an object");
  }
  return ordered_body.at("tool_choice");
}

// --- text and reasoning ---

// text.format → response_format: text (nothing), json_object, or json_schema {name, schema, description,
// strict} (the chat parser checks those). text.verbosity asks the model to write more or less than it
// would: only "medium", which asks nothing, is accepted.
absl::Status ReadText(const FieldReader& fields, const ordered_json& ordered_body, ResponsesTranslation& out) {
  const json* text = fields.Find("text");
  ordered_json echo{{"format", ordered_json{{"type", "text"}}}, {"verbosity", "medium"}};
  if (text == nullptr) {
    out.echo["text"] = std::move(echo);
    return absl::OkStatus();
  }
  if (!text->is_object()) return fields.WrongType("text", *text, "an object");
  const FieldReader text_fields(*text, "text.");
  ASSIGN_OR_RETURN(const std::optional<std::string> verbosity, text_fields.String("verbosity"));
  if (verbosity.has_value() && *verbosity != "medium") {
    if (*verbosity == "low" || *verbosity == "high") {
      return InvalidParameter("text.verbosity",
                              absl::StrCat("'text.verbosity': '", *verbosity,
                                           "' is not supported: the models served here take no verbosity setting; "
                                           "send 'medium' or leave it out"));
    }
    return InvalidParameter("text.verbosity",
                            absl::StrCat("'text.verbosity' must be 'low', 'medium' or 'high', got '", *verbosity, "'"));
  }
  if (const json* format = text_fields.Find("format"); format != nullptr) {
    if (!format->is_object()) return text_fields.WrongType("format", *format, "an object");
    const FieldReader format_fields(*format, "text.format.");
    ASSIGN_OR_RETURN(const std::string type, RequiredString(format_fields, "type"));
    const ordered_json& ordered_format = ordered_body.at("text").at("format");
    if (type == "json_object") {
      out.chat_body["response_format"] = ordered_json{{"type", "json_object"}};
    } else if (type == "json_schema") {
      ordered_json spec = ordered_json::object();
      for (const auto& [key, value] : ordered_format.items()) {
        if (key != "type") spec[key] = value;
      }
      out.chat_body["response_format"] = ordered_json{{"type", "json_schema"}, {"json_schema", std::move(spec)}};
    } else if (type != "text") {
      return InvalidParameter("text.format.type", absl::StrCat("text.format type '", type,
                                                               "' is not supported; use 'text', 'json_object' or "
                                                               "'json_schema'"));
    }
    echo["format"] = ordered_format;
  }
  out.echo["text"] = std::move(echo);
  return absl::OkStatus();
}

// reasoning.effort reaches the chat template as chat completions' reasoning_effort does (AddReasoningEffort). The
// client's own chat_template_kwargs win over it. No summaries are written (the reasoning items' summary stays empty),
// so reasoning.summary asks for nothing that could be refused.
absl::StatusOr<ordered_json> ReadReasoning(const FieldReader& fields, ResponsesTranslation& out) {
  ordered_json kwargs = ordered_json::object();
  ordered_json echo{{"effort", nullptr}, {"summary", nullptr}};
  if (const json* reasoning = fields.Find("reasoning"); reasoning != nullptr) {
    if (!reasoning->is_object()) return fields.WrongType("reasoning", *reasoning, "an object");
    const FieldReader reasoning_fields(*reasoning, "reasoning.");
    ASSIGN_OR_RETURN(const std::optional<std::string> effort, reasoning_fields.String("effort"));
    if (effort.has_value()) {
      RETURN_IF_ERROR(AddReasoningEffort(*effort, "reasoning.effort", kwargs));
      echo["effort"] = *effort;
    }
    for (const char* name : {"summary", "generate_summary"}) {
      ASSIGN_OR_RETURN(const std::optional<std::string> summary, reasoning_fields.String(name));
      if (!summary.has_value()) continue;
      if (*summary != "auto" && *summary != "concise" && *summary != "detailed") {
        return InvalidParameter(reasoning_fields.Param(name),
                                absl::StrCat("'", reasoning_fields.Param(name),
                                             "' must be auto, concise or detailed, got '", *summary, "'"));
      }
      echo["summary"] = *summary;
    }
  }
  out.echo["reasoning"] = std::move(echo);
  out.params.kwargs_from_reasoning = !kwargs.empty();
  return kwargs;
}

absl::Status ReadChatTemplateKwargs(const FieldReader& fields, const ordered_json& ordered_body, ordered_json kwargs,
                                    ResponsesTranslation& out) {
  if (const json* given = fields.Find("chat_template_kwargs"); given != nullptr) {
    if (!given->is_object()) return fields.WrongType("chat_template_kwargs", *given, "an object");
    for (const auto& [key, value] : ordered_body.at("chat_template_kwargs").items()) kwargs[key] = value;
    out.params.kwargs_from_reasoning = false;
  }
  if (!kwargs.empty()) out.chat_body["chat_template_kwargs"] = std::move(kwargs);
  return absl::OkStatus();
}

// Up to 16 string values under keys of up to 64 characters (values up to 512), as OpenAI bounds them.
absl::Status ReadMetadata(const FieldReader& fields, const ordered_json& ordered_body, ResponsesTranslation& out) {
  const json* metadata = fields.Find("metadata");
  if (metadata == nullptr) {
    out.echo["metadata"] = ordered_json::object();
    return absl::OkStatus();
  }
  if (!metadata->is_object()) return fields.WrongType("metadata", *metadata, "an object");
  if (metadata->size() > kMaxMetadataKeys) {
    return InvalidParameter(
        "metadata", absl::StrCat("'metadata' may hold at most ", kMaxMetadataKeys, " keys, got ", metadata->size()));
  }
  for (const auto& [key, value] : metadata->items()) {
    const std::string param = absl::StrCat("metadata.", key);
    if (key.size() > kMaxMetadataKeyLength) {
      return InvalidParameter(
          "metadata", absl::StrCat("'metadata' keys may be at most ", kMaxMetadataKeyLength, " characters long"));
    }
    if (!value.is_string()) return fields.WrongType(param, value, "a string");
    if (value.get_ref<const std::string&>().size() > kMaxMetadataValueLength) {
      return InvalidParameter(
          param, absl::StrCat("'metadata' values may be at most ", kMaxMetadataValueLength, " characters long"));
    }
  }
  out.echo["metadata"] = ordered_body.at("metadata");
  return absl::OkStatus();
}

// A field's value as the client sent it, or null.
ordered_json EchoOf(const FieldReader& fields, const ordered_json& ordered_body, const char* name) {
  return fields.Find(name) != nullptr ? ordered_body.at(name) : ordered_json(nullptr);
}

// Parses a "name[index]" prefix of `param`: the index, and what follows the "]".
bool SplitIndexed(const std::string& param, const std::string& name, size_t& index, std::string& rest) {
  if (!absl::StartsWith(param, name) || param.size() <= name.size() || param[name.size()] != '[') return false;
  const size_t close = param.find(']', name.size());
  if (close == std::string::npos) return false;
  if (!absl::SimpleAtoi(param.substr(name.size() + 1, close - name.size() - 1), &index)) return false;
  rest = param.substr(close + 1);
  return true;
}

// `text` without `prefix` when it starts with it.
std::string Without(const std::string& text, const std::string& prefix) {
  return absl::StartsWith(text, prefix) ? text.substr(prefix.size()) : text;
}

}  // namespace

std::string ResponsesParamMap::ToResponses(std::string_view chat_param) const {
  const std::string param(chat_param);
  size_t index = 0;
  std::string rest;
  if (param == "max_completion_tokens" || param == "max_tokens") return "max_output_tokens";
  if (param == "messages") return "input";
  if (SplitIndexed(param, "messages", index, rest)) {
    if (index >= message_sources.size()) return "input";
    const std::string& source = message_sources[index];
    // Message content parts keep their order; a tool call maps to the function_call item it came from (its
    // fields are that item's: `.function.arguments` is `.arguments`); other parts map to the item itself.
    if (absl::StartsWith(source, "input[") && absl::StartsWith(rest, ".content")) return source + rest;
    size_t call = 0;
    std::string call_rest;
    if (index < call_sources.size() && SplitIndexed(rest.substr(rest.empty() ? 0 : 1), "tool_calls", call, call_rest) &&
        call < call_sources[index].size()) {
      return call_sources[index][call] + Without(call_rest, ".function");
    }
    return source;
  }
  if (absl::StartsWith(param, "response_format")) {
    return "text.format" + Without(Without(param, "response_format"), ".json_schema");
  }
  if (SplitIndexed(param, "tools", index, rest)) {
    if (index >= tool_sources.size()) return "tools";
    return absl::StrCat("tools[", tool_sources[index], "]", Without(rest, ".function"));
  }
  if (absl::StartsWith(param, "tool_choice.function")) return "tool_choice" + Without(param, "tool_choice.function");
  if (absl::StartsWith(param, "chat_template_kwargs") && kwargs_from_reasoning) return "reasoning.effort";
  return param;
}

absl::Status ResponsesParamMap::Translate(absl::Status status) const {
  if (status.code() != absl::StatusCode::kInvalidArgument) return status;
  const std::string param = ParameterOf(status);
  if (param.empty()) return status;
  const std::string renamed = ToResponses(param);
  if (renamed == param) return status;
  const std::string message = absl::StrReplaceAll(status.message(), {{param, renamed}});
  absl::Status out = InvalidParameter(renamed, message);
  if (const std::string code = ErrorCodeOf(status); !code.empty()) out = WithErrorCode(std::move(out), code);
  return out;
}

absl::StatusOr<ResponsesTranslation> TranslateResponsesBody(std::string_view body) {
  ASSIGN_OR_RETURN(const json parsed, ParseRequestBody(body));
  OrderedBody ordered_parse(body);
  const ordered_json& ordered = ordered_parse.Get();
  const FieldReader fields(parsed);
  ASSIGN_OR_RETURN(const std::optional<bool> stream, fields.Bool("stream"));
  RETURN_IF_ERROR(RefuseStatefulFields(fields));
  RETURN_IF_ERROR(RefuseUnsupportedOptions(fields, stream.value_or(false)));

  ResponsesTranslation out;
  out.chat_body = ordered_json::object();
  out.echo = ordered_json::object();
  if (fields.Find("model") != nullptr) out.chat_body["model"] = ordered.at("model");

  // Instructions come first, as a system message; an empty string adds none.
  ordered_json messages = ordered_json::array();
  ASSIGN_OR_RETURN(const std::optional<std::string> instructions, fields.String("instructions"));
  if (instructions.has_value() && !instructions->empty()) {
    messages.push_back(ordered_json{{"role", "system"}, {"content", *instructions}});
    out.params.message_sources.push_back("instructions");
    out.params.call_sources.emplace_back();
  }
  RETURN_IF_ERROR(InputReader(messages, out.params).Read(fields));
  out.chat_body["messages"] = std::move(messages);

  out.echo["instructions"] = instructions.has_value() ? ordered_json(*instructions) : ordered_json(nullptr);
  out.echo["max_output_tokens"] = EchoOf(fields, ordered, "max_output_tokens");
  out.echo["max_tool_calls"] = EchoOf(fields, ordered, "max_tool_calls");

  ordered_json echo_tools;
  RETURN_IF_ERROR(ReadTools(fields, ordered, out, echo_tools));
  ASSIGN_OR_RETURN(ordered_json tool_choice, ReadToolChoice(fields, ordered, out));
  ASSIGN_OR_RETURN(const std::optional<bool> parallel_tool_calls, fields.Bool("parallel_tool_calls"));
  if (parallel_tool_calls.has_value()) out.chat_body["parallel_tool_calls"] = *parallel_tool_calls;
  out.echo["parallel_tool_calls"] = parallel_tool_calls.value_or(true);
  out.echo["previous_response_id"] = nullptr;
  ASSIGN_OR_RETURN(ordered_json kwargs, ReadReasoning(fields, out));
  out.echo["store"] = false;
  out.echo["temperature"] = EchoOf(fields, ordered, "temperature");
  RETURN_IF_ERROR(ReadText(fields, ordered, out));
  out.echo["tool_choice"] = std::move(tool_choice);
  out.echo["tools"] = std::move(echo_tools);
  out.echo["top_p"] = EchoOf(fields, ordered, "top_p");
  out.echo["truncation"] = "disabled";
  out.echo["user"] = EchoOf(fields, ordered, "user");
  RETURN_IF_ERROR(ReadMetadata(fields, ordered, out));

  if (fields.Find("max_output_tokens") != nullptr) {
    out.chat_body["max_completion_tokens"] = ordered.at("max_output_tokens");
  }
  for (const char* name : kSharedFields) {
    if (fields.Find(name) != nullptr) out.chat_body[name] = ordered.at(name);
  }
  RETURN_IF_ERROR(ReadChatTemplateKwargs(fields, ordered, std::move(kwargs), out));
  return out;
}

absl::StatusOr<ResponsesRequest> ParseResponsesRequest(std::string_view body) {
  ASSIGN_OR_RETURN(ResponsesTranslation translation, TranslateResponsesBody(body));
  absl::StatusOr<OpenAiRequest> chat = ParseChatCompletionRequest(DumpJson(translation.chat_body));
  if (!chat.ok()) return translation.params.Translate(chat.status());
  ResponsesRequest request;
  request.chat = *std::move(chat);
  request.echo = std::move(translation.echo);
  request.params = std::move(translation.params);
  return request;
}

}  // namespace llmc::gateway
