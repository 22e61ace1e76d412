// Tool-call formats whose arguments are JSON in marked blocks or in the whole output: hermes, DeepSeek V3 and
// V3.1, Llama 3 JSON.

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "worker/typed_output/call_parsing.h"

namespace llmc::typed_output::internal {
namespace {

constexpr std::string_view kDeepSeekCallsBegin = "<｜tool▁calls▁begin｜>";
constexpr std::string_view kDeepSeekCallsEnd = "<｜tool▁calls▁end｜>";
constexpr std::string_view kDeepSeekCallBegin = "<｜tool▁call▁begin｜>";
constexpr std::string_view kDeepSeekCallEnd = "<｜tool▁call▁end｜>";
constexpr std::string_view kDeepSeekSep = "<｜tool▁sep｜>";
constexpr std::string_view kPythonTag = "<|python_tag|>";

// Arguments as DeepSeek writes them: a JSON object, optionally fenced as ```json\n{...}\n```.
std::optional<std::string> FencedArguments(std::string_view text) {
  text = TrimSpace(text);
  if (StartsWith(text, "```")) {
    const size_t line_end = text.find('\n');
    if (line_end == std::string_view::npos) return std::nullopt;
    text.remove_prefix(line_end + 1);
    if (text.size() < 3 || text.substr(text.size() - 3) != "```") return std::nullopt;
    text.remove_suffix(3);
  }
  std::optional<nlohmann::ordered_json> object = ParseJsonObject(text);
  if (!object.has_value()) return std::nullopt;
  return CompactJson(*object);
}

std::optional<std::vector<ParsedCall>> OneCall(std::optional<ParsedCall> call) {
  if (!call.has_value()) return std::nullopt;
  std::vector<ParsedCall> calls;
  calls.push_back(std::move(*call));
  return calls;
}

// <tool_call>\n{"name": "f", "arguments": {...}}\n</tool_call>
class HermesParser : public BlockCallParser {
 public:
  explicit HermesParser(ToolCallParserOptions options)
      : BlockCallParser(BlockMarkers{"", "", "<tool_call>", "</tool_call>"}, std::move(options)) {}

 protected:
  std::optional<std::vector<ParsedCall>> ParseBlock(std::string_view block) const override {
    std::optional<nlohmann::ordered_json> object = ParseJsonObject(TrimSpace(block));
    if (!object.has_value()) return std::nullopt;
    return OneCall(CallFromJsonObject(*object, /*exact_keys=*/false));
  }
};

// <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME\n```json\n{...}\n```<｜tool▁call▁end｜>...
class DeepSeekV3Parser : public BlockCallParser {
 public:
  explicit DeepSeekV3Parser(ToolCallParserOptions options)
      : BlockCallParser(BlockMarkers{std::string(kDeepSeekCallsBegin), std::string(kDeepSeekCallsEnd),
                                     std::string(kDeepSeekCallBegin), std::string(kDeepSeekCallEnd)},
                        std::move(options)) {}

 protected:
  std::optional<std::vector<ParsedCall>> ParseBlock(std::string_view block) const override {
    const size_t sep = block.find(kDeepSeekSep);
    if (sep == std::string_view::npos) return std::nullopt;
    const std::string_view type = TrimSpace(block.substr(0, sep));
    if (!type.empty() && type != "function") return std::nullopt;
    std::string_view rest = block.substr(sep + kDeepSeekSep.size());
    const size_t name_end = std::min(rest.find('\n'), rest.find('`'));
    if (name_end == std::string_view::npos) return std::nullopt;
    ParsedCall call;
    call.name = std::string(TrimSpace(rest.substr(0, name_end)));
    if (!IsPlausibleName(call.name)) return std::nullopt;
    std::optional<std::string> arguments = FencedArguments(rest.substr(name_end));
    if (!arguments.has_value()) return std::nullopt;
    call.arguments = std::move(*arguments);
    return OneCall(std::move(call));
  }
};

// <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>NAME<｜tool▁sep｜>{...}<｜tool▁call▁end｜>...<｜tool▁calls▁end｜>
class DeepSeekV31Parser : public BlockCallParser {
 public:
  explicit DeepSeekV31Parser(ToolCallParserOptions options)
      : BlockCallParser(BlockMarkers{std::string(kDeepSeekCallsBegin), std::string(kDeepSeekCallsEnd),
                                     std::string(kDeepSeekCallBegin), std::string(kDeepSeekCallEnd)},
                        std::move(options)) {}

 protected:
  std::optional<std::vector<ParsedCall>> ParseBlock(std::string_view block) const override {
    const size_t sep = block.find(kDeepSeekSep);
    if (sep == std::string_view::npos) return std::nullopt;
    ParsedCall call;
    call.name = std::string(TrimSpace(block.substr(0, sep)));
    if (!IsPlausibleName(call.name)) return std::nullopt;
    std::optional<std::string> arguments = FencedArguments(block.substr(sep + kDeepSeekSep.size()));
    if (!arguments.has_value()) return std::nullopt;
    call.arguments = std::move(*arguments);
    return OneCall(std::move(call));
  }
};

// [<|python_tag|>]{"name": "f", "parameters": {...}}[; {...}]: the whole output, or it is content.
class Llama3JsonParser : public WholeTextCallParser {
 public:
  explicit Llama3JsonParser(ToolCallParserOptions options)
      : WholeTextCallParser({std::string(kPythonTag), "{"}, CallIdStyle::kOpenAi, std::move(options)) {}

 protected:
  std::optional<std::vector<ParsedCall>> ParseWhole(std::string_view text) const override {
    text = TrimSpace(text);
    if (StartsWith(text, kPythonTag)) text = TrimSpace(text.substr(kPythonTag.size()));
    std::vector<ParsedCall> calls;
    size_t pos = 0;
    while (true) {
      if (pos >= text.size() || text[pos] != '{') return std::nullopt;
      JsonExtentScanner scanner;
      scanner.Reset(pos);
      const std::optional<size_t> end = scanner.Scan(text);
      if (!end.has_value()) return std::nullopt;
      std::optional<nlohmann::ordered_json> object = ParseJsonObject(text.substr(pos, *end - pos));
      if (!object.has_value()) return std::nullopt;
      std::optional<ParsedCall> call = CallFromJsonObject(*object, /*exact_keys=*/true);
      if (!call.has_value()) return std::nullopt;
      calls.push_back(std::move(*call));
      pos = *end + LeadingSpace(text.substr(*end));
      if (pos == text.size()) return calls;
      if (text[pos] != ';') return std::nullopt;
      ++pos;
      pos += LeadingSpace(text.substr(pos));
      if (pos == text.size()) return calls;  // a trailing ';'
    }
  }
};

}  // namespace

std::unique_ptr<ToolCallParser> MakeHermesParser(ToolCallParserOptions options) {
  return std::make_unique<HermesParser>(std::move(options));
}
std::unique_ptr<ToolCallParser> MakeDeepSeekV3Parser(ToolCallParserOptions options) {
  return std::make_unique<DeepSeekV3Parser>(std::move(options));
}
std::unique_ptr<ToolCallParser> MakeDeepSeekV31Parser(ToolCallParserOptions options) {
  return std::make_unique<DeepSeekV31Parser>(std::move(options));
}
std::unique_ptr<ToolCallParser> MakeLlama3JsonParser(ToolCallParserOptions options) {
  return std::make_unique<Llama3JsonParser>(std::move(options));
}

}  // namespace llmc::typed_output::internal
