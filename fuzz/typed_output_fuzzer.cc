// Fuzzes the reading of a model's text back as content, reasoning and tool calls (worker/typed_output/), and
// the tool-call grammars. The input is three header bytes, then the model text:
//   byte 0: the format (modulo 8: none, hermes, qwen3_coder, llama3_json, pythonic, mistral, deepseek_v3,
//           deepseek_v31), and above it the flags 0x08 reasoning markers <think>/</think> on, 0x10 the answer
//           starts in reasoning, 0x20 no start marker (only </think>), 0x40 the parser knows a fixed set of
//           tools (qwen3_coder types its values by their schemas), 0x80 the tool-call grammar check below;
//   byte 1: how the text is cut into the pieces fed one by one (low 2 bits: one byte at a time, pieces of a
//           fixed size, pieces of random sizes (empty ones too), cuts around markup bytes; above: a size);
//   byte 2: the grammar check's choice (low 2 bits: auto, required, named, none), 0x04 parallel calls,
//           0x38 which tool is named, 0x40 a name that is not among the tools, 0x80 a json_object content.
//
// The parser is run on the whole text and on its pieces, with the same id seed; checked:
//   - both give the same content, reasoning and calls (index, id, name, arguments), and made_tool_calls()
//     says whether there are calls;
//   - the calls are numbered 0, 1, 2, ..., each has a name, a unique id of its format's shape ("call_" and
//     24 letters and digits, Mistral 9) and arguments that are a JSON object's compact text;
//   - when no call is reported and the text cannot open reasoning, nothing was dropped: the content is the
//     text, byte for byte; when the answer starts in reasoning and never closes it, all of it is reasoning;
//   - content, reasoning and calls together stay within a small multiple of the text's size.
// With flag 0x80, on texts up to 4 KiB, the text is read as a request's `tools` JSON (ReadFunctionTools;
// a refusal is INVALID_ARGUMENT with a message) and, with at most 8 tools, BuildToolCallGrammar makes the
// grammar for byte 2's choice (a refusal: INVALID_ARGUMENT with a message), which is compiled with the
// default limits and walked byte by byte (up to 1 KiB, steered towards closing what it opened). When a
// required or named grammar may end and the tools' names and parameters are plain identifiers, the parser
// reads the walked text as calls (unless it holds a number beyond a double's range, which nlohmann
// refuses): at least one (exactly one, of the named tool, when named; at most one without parallel calls),
// each of a tool among them.
#include <algorithm>
#include <bitset>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "llmc/v1/types.pb.h"
#include "nlohmann/json.hpp"
#include "worker/grammar/automaton.h"
#include "worker/grammar/grammar.h"
#include "worker/grammar/json_schema_compiler.h"
#include "worker/grammar/matcher.h"
#include "worker/typed_output/output_format.h"
#include "worker/typed_output/output_parser.h"
#include "worker/typed_output/tool_call_grammar.h"

namespace {

using llmc::typed_output::ChoiceOutputParser;
using llmc::typed_output::FunctionTool;
using llmc::typed_output::ReasoningMarkers;
using llmc::typed_output::ToolCallFormat;
using llmc::typed_output::ToolCallPart;
using llmc::typed_output::TypedDelta;

constexpr size_t kHeaderBytes = 3;
constexpr size_t kMaxToolsInputBytes = 4096;
constexpr size_t kMaxTools = 8;
constexpr size_t kMaxWalkBytes = 1024;
// Output bytes per input byte, at most: a control character in a Qwen3-Coder string value becomes \u00XX
// (6 bytes), a pythonic call "f()," (4 bytes) a call with a 29-byte id, a 1-byte name and "{}".
constexpr size_t kMaxGrowth = 12;

[[noreturn]] void Fail(const std::string& what, std::string_view text) {
  static const char kHex[] = "0123456789abcdef";
  std::string printable;
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte >= 0x20 && byte < 0x7F && byte != '\\') {
      printable += c;
    } else {
      printable += "\\x";
      printable += kHex[byte >> 4];
      printable += kHex[byte & 15];
    }
  }
  std::cerr << what << "\ntext: " << printable << "\n";
  std::abort();
}

// A PRNG (splitmix64) seeded from the whole input.
class Random {
 public:
  explicit Random(std::string_view whole) {
    state_ = 0xcbf29ce484222325u;  // FNV-1a
    for (const char c : whole) state_ = (state_ ^ static_cast<unsigned char>(c)) * 0x100000001b3u;
  }
  uint64_t Next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
  }
  size_t Below(size_t n) { return static_cast<size_t>(Next() % n); }

 private:
  uint64_t state_;
};

struct Setup {
  ToolCallFormat format = ToolCallFormat::kNone;
  ReasoningMarkers markers;
  bool starts_in_reasoning = false;
  std::vector<FunctionTool> tools;
  uint64_t id_seed = 0;
};

struct Parsed {
  TypedDelta delta;
  bool made_tool_calls = false;
};

Parsed Parse(const Setup& setup, const std::vector<std::string_view>& pieces) {
  llmc::typed_output::ToolCallParserOptions options;
  options.tools = setup.tools;
  options.id_seed = setup.id_seed;
  ChoiceOutputParser parser(setup.markers, setup.starts_in_reasoning,
                            llmc::typed_output::MakeToolCallParser(setup.format, std::move(options)));
  Parsed parsed;
  for (const std::string_view piece : pieces) parsed.delta.Append(parser.Add(piece));
  parsed.delta.Append(parser.Finish());
  parsed.made_tool_calls = parser.made_tool_calls();
  return parsed;
}

bool IsMarkupByte(unsigned char byte) {
  return std::string_view("<>[]{}()|\n,\"=:;`").find(static_cast<char>(byte)) != std::string_view::npos ||
         byte >= 0xC0;  // a UTF-8 lead byte (DeepSeek's markers are full of them)
}

std::vector<std::string_view> Cut(std::string_view text, uint8_t how, Random& random) {
  std::vector<std::string_view> pieces;
  const size_t size = (how >> 2) + 1;
  size_t at = 0;
  switch (how & 3) {
    case 0:  // one byte at a time
      for (; at < text.size(); ++at) pieces.push_back(text.substr(at, 1));
      break;
    case 1:  // fixed-size pieces
      for (; at < text.size(); at += size) pieces.push_back(text.substr(at, size));
      break;
    case 2:  // random sizes, empty pieces included
      while (at < text.size()) {
        const size_t length = random.Below(size + 1);
        pieces.push_back(text.substr(at, length));
        at += length;
      }
      pieces.emplace_back();
      break;
    case 3:  // cuts before and after markup bytes, and a few elsewhere
      for (size_t i = 0; i < text.size(); ++i) {
        const bool cut_before = IsMarkupByte(static_cast<unsigned char>(text[i])) || random.Below(size + 1) == 0;
        const bool cut_after = IsMarkupByte(static_cast<unsigned char>(text[i]));
        if (cut_before && i > at) {
          pieces.push_back(text.substr(at, i - at));
          at = i;
        }
        if (cut_after) {
          pieces.push_back(text.substr(at, i + 1 - at));
          at = i + 1;
        }
      }
      if (at < text.size()) pieces.push_back(text.substr(at));
      break;
  }
  return pieces;
}

bool IsAlnum(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'); }

bool IsWellFormedId(const std::string& id, ToolCallFormat format) {
  std::string_view rest = id;
  if (format == ToolCallFormat::kMistral) {
    if (rest.size() != 9) return false;
  } else {
    if (rest.substr(0, 5) != "call_" || rest.size() != 29) return false;
    rest.remove_prefix(5);
  }
  return std::all_of(rest.begin(), rest.end(), IsAlnum);
}

void CheckCalls(const Setup& setup, const Parsed& parsed, std::string_view text) {
  const std::vector<ToolCallPart>& calls = parsed.delta.tool_calls;
  if (parsed.made_tool_calls != !calls.empty()) Fail("made_tool_calls() disagrees with the calls reported", text);
  std::set<std::string> ids;
  for (size_t i = 0; i < calls.size(); ++i) {
    const ToolCallPart& call = calls[i];
    if (call.index != i) Fail("call " + std::to_string(i) + " has index " + std::to_string(call.index), text);
    if (call.name.empty()) Fail("a call without a name", text);
    if (!IsWellFormedId(call.id, setup.format)) Fail("a call id of the wrong shape: '" + call.id + "'", text);
    if (!ids.insert(call.id).second) Fail("two calls with the id '" + call.id + "'", text);
    const nlohmann::ordered_json arguments =
        nlohmann::ordered_json::parse(call.arguments, nullptr, /*allow_exceptions=*/false);
    if (arguments.is_discarded() || !arguments.is_object()) {
      Fail("call arguments that are not a JSON object: " + call.arguments, text);
    }
    if (arguments.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::strict) != call.arguments) {
      Fail("call arguments that are not compact JSON: " + call.arguments, text);
    }
  }
}

bool SameCalls(const std::vector<ToolCallPart>& a, const std::vector<ToolCallPart>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].index != b[i].index || a[i].id != b[i].id || a[i].name != b[i].name || a[i].arguments != b[i].arguments) {
      return false;
    }
  }
  return true;
}

void CheckParse(const Setup& setup, std::string_view text, uint8_t how, Random& random) {
  const Parsed whole = Parse(setup, {text});
  const Parsed split = Parse(setup, Cut(text, how, random));
  if (split.delta.content != whole.delta.content) Fail("the content depends on how the text is cut", text);
  if (split.delta.reasoning != whole.delta.reasoning) Fail("the reasoning depends on how the text is cut", text);
  if (!SameCalls(split.delta.tool_calls, whole.delta.tool_calls)) {
    Fail("the calls depend on how the text is cut", text);
  }
  CheckCalls(setup, whole, text);

  const TypedDelta& out = whole.delta;
  const ReasoningMarkers& markers = setup.markers;
  const bool may_open_reasoning =
      markers.enabled() &&
      (setup.starts_in_reasoning || (!markers.start.empty() && text.find(markers.start) != std::string_view::npos));
  if (!may_open_reasoning) {
    if (!out.reasoning.empty()) Fail("reasoning from a text that cannot open it", text);
    if (out.tool_calls.empty() && out.content != text) Fail("no call, but the content is not the text", text);
  }
  if (markers.enabled() && setup.starts_in_reasoning && text.find(markers.end) == std::string_view::npos &&
      (markers.start.empty() || text.find(markers.start) == std::string_view::npos)) {
    if (out.reasoning != text || !out.content.empty() || !out.tool_calls.empty()) {
      Fail("the answer starts in reasoning and never closes it, but is not all reasoning", text);
    }
  }
  size_t total = out.content.size() + out.reasoning.size();
  for (const ToolCallPart& call : out.tool_calls) total += call.id.size() + call.name.size() + call.arguments.size();
  if (total > kMaxGrowth * text.size() + 64) {
    Fail("the output is " + std::to_string(total) + " bytes for a text of " + std::to_string(text.size()), text);
  }
}

// The parser's fixed tools (flag 0x40): schemas that type Qwen3-Coder values every way.
const std::vector<FunctionTool>& FixedTools() {
  static const std::vector<FunctionTool>* const tools = [] {
    absl::StatusOr<std::vector<FunctionTool>> read = llmc::typed_output::ReadFunctionTools(R"([
      {"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {
        "a": {"type": "integer"}, "n": {"type": "number"}, "b": {"type": "boolean"}, "s": {"type": "string"},
        "o": {"type": "object"}, "l": {"type": "array"}, "z": {"type": "null"},
        "u": {"type": ["string", "integer"]}, "v": {"type": ["number", "null"]}, "w": {}}}}},
      {"type": "function", "function": {"name": "g", "strict": true, "parameters": {"type": "object",
        "properties": {"p": {"type": "string"}}, "required": ["p"], "additionalProperties": false}}},
      {"type": "web_search"}])");
    if (!read.ok()) Fail("the fixed tools do not read: " + read.status().ToString(), "");
    return new std::vector<FunctionTool>(*std::move(read));
  }();
  return *tools;
}

void CheckRefusal(const absl::Status& status, const std::string& stage, std::string_view text) {
  if (status.code() != absl::StatusCode::kInvalidArgument || status.message().empty()) {
    Fail(stage + " refused with other than INVALID_ARGUMENT and a message: " + status.ToString(), text);
  }
}

// [A-Za-z_][A-Za-z0-9_]*, up to 64 bytes.
bool IsIdentifier(std::string_view name) {
  if (name.empty() || name.size() > 64 || (name[0] >= '0' && name[0] <= '9')) return false;
  return std::all_of(name.begin(), name.end(), [](char c) { return IsAlnum(c) || c == '_'; });
}

// Whether the parser is expected to read every call the grammar allows: tool and parameter names (listed or
// required) that every format's parser accepts.
bool PlainTools(const std::vector<FunctionTool>& tools) {
  for (const FunctionTool& tool : tools) {
    if (!IsIdentifier(tool.name)) return false;
    const auto properties = tool.parameters.find("properties");
    if (properties != tool.parameters.end() && properties->is_object()) {
      for (const auto& [key, value] : properties->items()) {
        if (!IsIdentifier(key)) return false;
      }
    }
    const auto required = tool.parameters.find("required");
    if (required != tool.parameters.end() && required->is_array()) {
      for (const auto& key : *required) {
        if (!key.is_string() || !IsIdentifier(key.get_ref<const std::string&>())) return false;
      }
    }
  }
  return true;
}

// The next byte of the walk: mostly the next byte of a closing marker the walk has begun (reasoning's end, a
// raw parameter value's end), half of the rest a byte that closes something (a quote, a bracket, a line) or
// begins such a marker, else any allowed byte, ASCII preferred.
int NextByte(const std::bitset<256>& allowed, const std::string& walked, const std::vector<std::string>& targets,
             Random& random) {
  int continued = -1;
  size_t longest = 0;
  for (const std::string& target : targets) {
    for (size_t k = std::min(walked.size(), target.size() - 1); k > longest; --k) {
      if (walked.compare(walked.size() - k, k, target, 0, k) == 0 && allowed[static_cast<unsigned char>(target[k])]) {
        continued = static_cast<unsigned char>(target[k]);
        longest = k;
        break;
      }
    }
  }
  if (continued >= 0 && random.Below(16) != 0) return continued;
  if (random.Below(2) == 0) {
    for (const std::string& target : targets) {
      if (allowed[static_cast<unsigned char>(target[0])] && random.Below(8) == 0) {
        return static_cast<unsigned char>(target[0]);
      }
    }
    std::vector<int> closing;
    for (const char c : std::string_view("\"}])>\n")) {
      if (allowed[static_cast<unsigned char>(c)]) closing.push_back(static_cast<unsigned char>(c));
    }
    if (!closing.empty()) return closing[random.Below(closing.size())];
  }
  std::vector<int> ascii;
  std::vector<int> any;
  for (int byte = 0; byte < 256; ++byte) {
    if (!allowed[byte]) continue;
    any.push_back(byte);
    if (byte < 0x80) ascii.push_back(byte);
  }
  const std::vector<int>& from = !ascii.empty() && random.Below(16) != 0 ? ascii : any;
  return from[random.Below(from.size())];
}

// Whether `text` has a number too large for a double (1e999): valid JSON, which the JSON grammars allow, but
// nlohmann refuses it, so the parsers read a call holding one as content (a known limitation).
bool HasHugeNumber(std::string_view text) {
  for (size_t i = 1; i < text.size(); ++i) {
    const char before = text[i - 1];
    if ((text[i] != 'e' && text[i] != 'E') || !((before >= '0' && before <= '9') || before == '.')) continue;
    size_t j = i + 1;
    if (j < text.size() && text[j] == '+') ++j;
    int exponent = 0;
    for (; j < text.size() && text[j] >= '0' && text[j] <= '9'; ++j)
      exponent = std::min(exponent * 10 + (text[j] - '0'), 100000);
    if (exponent > 300) return true;
  }
  return false;
}

// The parser's reading of a text the grammar of `constraint` accepts whole.
void CheckForcedCalls(const llmc::v1::ToolCallConstraint& constraint, ToolCallFormat format,
                      const std::vector<FunctionTool>& tools, const std::string& walked, std::string_view input) {
  if (HasHugeNumber(walked)) return;
  Setup setup;
  setup.format = format;
  setup.markers = ReasoningMarkers{constraint.reasoning_start(), constraint.reasoning_end()};
  setup.starts_in_reasoning = constraint.starts_in_reasoning();
  setup.tools = tools;
  const Parsed parsed = Parse(setup, {walked});
  const std::vector<ToolCallPart>& calls = parsed.delta.tool_calls;
  const std::string where = "\nwalked: " + walked + "\ntools";
  CheckCalls(setup, parsed, walked);
  if (calls.empty()) Fail("the grammar forces a call, but the parser reads none" + where, input);
  const bool named = constraint.choice() == llmc::v1::TOOL_CHOICE_NAMED;
  if ((named || !constraint.parallel()) && calls.size() > 1) {
    Fail("the grammar allows one call, but the parser reads " + std::to_string(calls.size()) + where, input);
  }
  for (const ToolCallPart& call : calls) {
    if (named && call.name != constraint.name()) Fail("the named tool is not the one called" + where, input);
    const bool known =
        std::any_of(tools.begin(), tools.end(), [&](const FunctionTool& tool) { return tool.name == call.name; });
    if (!known) Fail("the parser reads a call of '" + call.name + "', not among the tools" + where, input);
  }
}

void CheckToolGrammar(const Setup& setup, std::string_view text, uint8_t config, Random& random) {
  absl::StatusOr<std::vector<FunctionTool>> tools = llmc::typed_output::ReadFunctionTools(text);
  if (!tools.ok()) {
    CheckRefusal(tools.status(), "ReadFunctionTools", text);
    return;
  }
  if (tools->size() > kMaxTools) return;

  llmc::v1::ToolCallConstraint constraint;
  constraint.set_format(std::string(llmc::typed_output::ToolCallFormatName(setup.format)));
  constraint.set_tools_json(std::string(text));
  static constexpr llmc::v1::ToolChoice kChoices[] = {llmc::v1::TOOL_CHOICE_AUTO, llmc::v1::TOOL_CHOICE_REQUIRED,
                                                      llmc::v1::TOOL_CHOICE_NAMED, llmc::v1::TOOL_CHOICE_NONE};
  constraint.set_choice(kChoices[config & 3]);
  constraint.set_parallel((config & 0x04) != 0);
  if (constraint.choice() == llmc::v1::TOOL_CHOICE_NAMED) {
    if (tools->empty() || (config & 0x40) != 0) {
      constraint.set_name("not_a_tool");
    } else {
      constraint.set_name((*tools)[((config >> 3) & 7) % tools->size()].name);
    }
  }
  constraint.set_reasoning_start(setup.markers.start);
  constraint.set_reasoning_end(setup.markers.end);
  constraint.set_starts_in_reasoning(setup.starts_in_reasoning);
  if ((config & 0x80) != 0) constraint.mutable_content()->set_json_object(true);

  absl::StatusOr<llmc::grammar::Grammar> grammar =
      llmc::typed_output::BuildToolCallGrammar(constraint, llmc::grammar::JsonSchemaOptions{});
  if (!grammar.ok()) {
    CheckRefusal(grammar.status(), "BuildToolCallGrammar", text);
    return;
  }
  absl::StatusOr<std::shared_ptr<const llmc::grammar::CompiledGrammar>> compiled =
      llmc::grammar::CompileGrammar(*grammar);
  if (!compiled.ok()) {
    CheckRefusal(compiled.status(), "CompileGrammar", text);
    return;
  }

  const bool forced =
      constraint.choice() == llmc::v1::TOOL_CHOICE_REQUIRED || constraint.choice() == llmc::v1::TOOL_CHOICE_NAMED;
  const bool check_calls = forced && PlainTools(*tools);
  std::vector<std::string> targets;
  if (setup.markers.enabled()) targets.push_back(setup.markers.end);
  if (setup.format == ToolCallFormat::kQwen3CoderXml) targets.push_back("\n</parameter>");
  llmc::grammar::GrammarMatcher matcher(*compiled, nullptr);
  std::string walked;
  bool checked = false;
  while (walked.size() < kMaxWalkBytes) {
    if (matcher.CanEnd() && check_calls && !checked) {
      CheckForcedCalls(constraint, setup.format, *tools, walked, text);
      checked = true;
    }
    const std::bitset<256> allowed = matcher.AllowedNextBytes();
    if (allowed.none()) break;
    const char byte = static_cast<char>(NextByte(allowed, walked, targets, random));
    if (!matcher.AcceptBytes(absl::string_view(&byte, 1))) Fail("the grammar refused an allowed byte", text);
    walked += byte;
  }
  if (matcher.CanEnd() && check_calls) CheckForcedCalls(constraint, setup.format, *tools, walked, text);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < kHeaderBytes) return 0;
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const std::string_view text = input.substr(kHeaderBytes);
  const uint8_t flags = data[0];
  Random random(input);

  Setup setup;
  setup.format = static_cast<ToolCallFormat>(flags % 8);
  if ((flags & 0x08) != 0) setup.markers = ReasoningMarkers{(flags & 0x20) != 0 ? "" : "<think>", "</think>"};
  setup.starts_in_reasoning = (flags & 0x10) != 0;
  if ((flags & 0x40) != 0) setup.tools = FixedTools();
  setup.id_seed = random.Next();
  CheckParse(setup, text, data[1], random);

  if ((flags & 0x80) != 0 && text.size() <= kMaxToolsInputBytes) CheckToolGrammar(setup, text, data[2], random);
  return 0;
}
