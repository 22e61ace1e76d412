// Qwen3-Coder's XML tool calls:
//   <tool_call>
//   <function=NAME>
//   <parameter=P>
//   VALUE
//   </parameter>
//   ...
//   </function>
//   </tool_call>
// A value loses one leading and one trailing newline and is typed by the tool's schema (properties[P].type):
// "string", an unknown tool or parameter, or no type → a JSON string; another type → the value read as JSON,
// a JSON string when it does not read (or, for a type list that allows strings, when it reads as none of the
// others). Arguments keep the parameters' order.

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "worker/typed_output/call_parsing.h"

namespace llmc::typed_output::internal {
namespace {

using Json = nlohmann::ordered_json;

constexpr std::string_view kFunctionOpen = "<function=";
constexpr std::string_view kFunctionClose = "</function>";
constexpr std::string_view kParameterOpen = "<parameter=";
constexpr std::string_view kParameterClose = "</parameter>";

bool StartsWith(std::string_view text, std::string_view prefix) { return text.substr(0, prefix.size()) == prefix; }

// The JSON-schema types a parameter may take; empty when the schema does not say.
std::vector<std::string> ParameterTypes(const std::vector<FunctionTool>& tools, std::string_view function,
                                        const std::string& parameter) {
  std::vector<std::string> types;
  for (const FunctionTool& tool : tools) {
    if (tool.name != function) continue;
    const auto properties = tool.parameters.find("properties");
    if (properties == tool.parameters.end() || !properties->is_object()) break;
    const auto property = properties->find(parameter);
    if (property == properties->end() || !property->is_object()) break;
    const auto type = property->find("type");
    if (type == property->end()) break;
    if (type->is_string()) types.push_back(type->get<std::string>());
    if (type->is_array()) {
      for (const Json& entry : *type) {
        if (entry.is_string()) types.push_back(entry.get<std::string>());
      }
    }
    break;
  }
  return types;
}

bool HasType(const Json& value, const std::string& type) {
  if (type == "integer") return value.is_number_integer();
  if (type == "number") return value.is_number();
  if (type == "boolean") return value.is_boolean();
  if (type == "object") return value.is_object();
  if (type == "array") return value.is_array();
  if (type == "null") return value.is_null();
  return false;
}

Json TypedValue(const std::vector<std::string>& types, const std::string& text) {
  bool allows_string = types.empty();
  bool allows_other = false;
  for (const std::string& type : types) {
    if (type == "string") {
      allows_string = true;
    } else {
      allows_other = true;
    }
  }
  if (!allows_other) return Json(text);
  const std::string_view trimmed = TrimSpace(text);
  Json parsed = Json::parse(trimmed.begin(), trimmed.end(), nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded()) {
    // Python's spellings, as the model may write them.
    if (trimmed == "True") parsed = true;
    if (trimmed == "False") parsed = false;
    if (trimmed == "None") parsed = nullptr;
  }
  if (parsed.is_discarded()) return Json(text);
  if (!allows_string) return parsed;
  for (const std::string& type : types) {
    if (HasType(parsed, type)) return parsed;
  }
  return Json(text);
}

class Qwen3CoderParser : public BlockCallParser {
 public:
  explicit Qwen3CoderParser(ToolCallParserOptions options)
      : BlockCallParser(BlockMarkers{"", "", "<tool_call>", "</tool_call>"}, std::move(options)) {}

 protected:
  std::optional<std::vector<ParsedCall>> ParseBlock(std::string_view block) const override {
    std::vector<ParsedCall> calls;
    size_t pos = 0;
    auto skip_space = [&] { pos += LeadingSpace(block.substr(pos)); };
    while (true) {
      skip_space();
      if (pos == block.size()) break;
      if (!StartsWith(block.substr(pos), kFunctionOpen)) return std::nullopt;
      pos += kFunctionOpen.size();
      const size_t name_end = block.find('>', pos);
      if (name_end == std::string_view::npos) return std::nullopt;
      ParsedCall call;
      call.name = std::string(TrimSpace(block.substr(pos, name_end - pos)));
      if (!IsPlausibleName(call.name)) return std::nullopt;
      pos = name_end + 1;
      Json arguments = Json::object();
      while (true) {
        skip_space();
        if (StartsWith(block.substr(pos), kFunctionClose)) {
          pos += kFunctionClose.size();
          break;
        }
        if (!StartsWith(block.substr(pos), kParameterOpen)) return std::nullopt;
        pos += kParameterOpen.size();
        const size_t parameter_end = block.find('>', pos);
        if (parameter_end == std::string_view::npos) return std::nullopt;
        const std::string parameter(TrimSpace(block.substr(pos, parameter_end - pos)));
        if (parameter.empty()) return std::nullopt;
        pos = parameter_end + 1;
        const size_t value_end = block.find(kParameterClose, pos);
        if (value_end == std::string_view::npos) return std::nullopt;
        std::string_view value = block.substr(pos, value_end - pos);
        if (StartsWith(value, "\r\n")) {
          value.remove_prefix(2);
        } else if (StartsWith(value, "\n")) {
          value.remove_prefix(1);
        }
        if (value.size() >= 2 && value.substr(value.size() - 2) == "\r\n") {
          value.remove_suffix(2);
        } else if (!value.empty() && value.back() == '\n') {
          value.remove_suffix(1);
        }
        arguments[parameter] = TypedValue(ParameterTypes(tools(), call.name, parameter), std::string(value));
        pos = value_end + kParameterClose.size();
      }
      call.arguments = CompactJson(arguments);
      calls.push_back(std::move(call));
    }
    if (calls.empty()) return std::nullopt;
    return calls;
  }
};

}  // namespace

std::unique_ptr<ToolCallParser> MakeQwen3CoderParser(ToolCallParserOptions options) {
  return std::make_unique<Qwen3CoderParser>(std::move(options));
}

}  // namespace llmc::typed_output::internal
