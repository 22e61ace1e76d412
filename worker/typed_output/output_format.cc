#include "worker/typed_output/output_format.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/json_shape.h"
#include "common/status_macros.h"

namespace llmc::typed_output {
namespace {

constexpr std::pair<ToolCallFormat, std::string_view> kFormatNames[] = {
    {ToolCallFormat::kNone, "none"},
    {ToolCallFormat::kHermes, "hermes"},
    {ToolCallFormat::kQwen3CoderXml, "qwen3_coder"},
    {ToolCallFormat::kLlama3Json, "llama3_json"},
    {ToolCallFormat::kPythonic, "pythonic"},
    {ToolCallFormat::kMistral, "mistral"},
    {ToolCallFormat::kDeepSeekV3, "deepseek_v3"},
    {ToolCallFormat::kDeepSeekV31, "deepseek_v31"},
    {ToolCallFormat::kHarmony, "harmony"},
};

}  // namespace

std::string_view ToolCallFormatName(ToolCallFormat format) {
  for (const auto& [known, name] : kFormatNames) {
    if (known == format) return name;
  }
  return "none";
}

absl::StatusOr<ToolCallFormat> ParseToolCallFormat(std::string_view name) {
  std::vector<std::string> names;
  for (const auto& [format, known] : kFormatNames) {
    if (known == name) return format;
    names.emplace_back(known);
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown tool-call format '", std::string(name), "'; expected one of ", absl::StrJoin(names, ", ")));
}

std::vector<std::string> ToolCallMarkers(ToolCallFormat format) {
  switch (format) {
    case ToolCallFormat::kNone:
    case ToolCallFormat::kPythonic:
      return {};
    case ToolCallFormat::kHermes:
    case ToolCallFormat::kQwen3CoderXml:
      return {"<tool_call>", "</tool_call>"};
    case ToolCallFormat::kLlama3Json:
      return {"<|python_tag|>"};
    case ToolCallFormat::kMistral:
      return {"[TOOL_CALLS]", "[ARGS]", "[CALL_ID]"};
    case ToolCallFormat::kDeepSeekV3:
    case ToolCallFormat::kDeepSeekV31:
      return {"<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>", "<｜tool▁call▁begin｜>", "<｜tool▁call▁end｜>",
              "<｜tool▁sep｜>"};
    case ToolCallFormat::kHarmony:
      return {"<|start|>", "<|end|>", "<|message|>", "<|channel|>", "<|constrain|>", "<|return|>", "<|call|>"};
  }
  return {};
}

absl::StatusOr<std::vector<FunctionTool>> ReadFunctionTools(std::string_view tools_json) {
  std::vector<FunctionTool> tools;
  if (tools_json.empty()) return tools;
  RETURN_IF_ERROR(CheckNoNulByte(tools_json, "'tools'"));
  nlohmann::ordered_json parsed = nlohmann::ordered_json::parse(tools_json, nullptr, /*allow_exceptions=*/false);
  if (!parsed.is_array()) return absl::InvalidArgumentError("'tools' must be a JSON array");
  for (size_t i = 0; i < parsed.size(); ++i) {
    const nlohmann::ordered_json& tool = parsed[i];
    if (!tool.is_object()) return absl::InvalidArgumentError(absl::StrCat("tools[", i, "] must be an object"));
    const auto type = tool.find("type");
    if (type != tool.end() && (!type->is_string() || type->get<std::string>() != "function")) continue;
    const auto function = tool.find("function");
    if (function == tool.end() || !function->is_object()) {
      return absl::InvalidArgumentError(absl::StrCat("tools[", i, "] needs a 'function' object"));
    }
    const auto name = function->find("name");
    if (name == function->end() || !name->is_string() || name->get<std::string>().empty()) {
      return absl::InvalidArgumentError(absl::StrCat("tools[", i, "].function needs a 'name'"));
    }
    FunctionTool read;
    read.name = name->get<std::string>();
    const auto parameters = function->find("parameters");
    read.parameters =
        parameters != function->end() && parameters->is_object() ? *parameters : nlohmann::ordered_json::object();
    const auto strict = function->find("strict");
    read.strict = strict != function->end() && strict->is_boolean() && strict->get<bool>();
    tools.push_back(std::move(read));
  }
  return tools;
}

void TypedDelta::Append(TypedDelta other) {
  content += other.content;
  reasoning += other.reasoning;
  for (ToolCallPart& part : other.tool_calls) tool_calls.push_back(std::move(part));
}

}  // namespace llmc::typed_output
