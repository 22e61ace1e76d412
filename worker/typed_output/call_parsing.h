#ifndef LLMC_WORKER_TYPED_OUTPUT_CALL_PARSING_H_
#define LLMC_WORKER_TYPED_OUTPUT_CALL_PARSING_H_

// Internal to llmc_typed_output: what the tool-call parsers of the formats share (marker hold-back, call ids,
// argument canonicalisation, the block and whole-text state machines) and the per-format factories.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "nlohmann/json.hpp"
#include "worker/typed_output/output_parser.h"

namespace llmc::typed_output::internal {

// A held or buffered call larger than this is given up and comes back as content (memory stays bounded).
inline constexpr size_t kMaxCallBytes = size_t{1} << 20;
// Whitespace before a marker is only read as leading up to it when there is at most this much of it, so what is
// held while undecided stays small (each piece rescans it) and the decision does not depend on how text arrives.
inline constexpr size_t kMaxHeldSpace = 4096;

bool IsSpace(char c);
std::string_view TrimSpace(std::string_view text);
bool IsAllSpace(std::string_view text);
size_t LeadingSpace(std::string_view text);
// The longest suffix of `text` that is a proper prefix of `marker` (what may begin the marker), in bytes.
size_t PartialMarkerSuffix(std::string_view text, std::string_view marker);
// Whether `text` is a proper prefix of `marker` (it may still become the marker).
bool IsProperPrefix(std::string_view text, std::string_view marker);
// True when `text` begins with `prefix`.
inline bool StartsWith(std::string_view text, std::string_view prefix) {
  return text.substr(0, prefix.size()) == prefix;
}

// A JSON value's text parsed into an ordered object; nullopt for anything else (bad JSON, not an object).
std::optional<nlohmann::ordered_json> ParseJsonObject(std::string_view text);
// Compact JSON text of a value; invalid UTF-8 in strings is replaced, never thrown.
std::string CompactJson(const nlohmann::ordered_json& value);
// A call's "arguments"/"parameters" value as compact JSON object text: an object, or a string holding one's
// JSON (some models quote their arguments); nullopt for anything else.
std::optional<std::string> ArgumentsText(const nlohmann::ordered_json& value);
// A function name as models write it: non-empty, no whitespace or control characters, no quotes or brackets.
bool IsPlausibleName(std::string_view name);

// Finds where a JSON object or array ends, across calls as text arrives: strings and escapes are skipped, brackets
// counted; nothing is validated (the parse that follows does). Feed it the same growing buffer each time.
class JsonExtentScanner {
 public:
  // `start` is the offset of the opening '{' or '['.
  void Reset(size_t start);
  // The offset just past the closing bracket, or nullopt while the value is not closed yet.
  std::optional<size_t> Scan(std::string_view buffer);

 private:
  size_t pos_ = 0;
  size_t depth_ = 0;
  bool in_string_ = false;
  bool escaped_ = false;
};

// One call read out of the text.
struct ParsedCall {
  std::string name;
  std::string arguments;  // compact JSON object text
};

// A call written as a JSON object {"name": "f", "arguments"|"parameters": {...}}: the name must be plausible, the
// arguments an object (or its JSON in a string); with `exact_keys` nothing else may be there and the arguments must
// be present, otherwise other keys are ignored and absent arguments read as {}.
std::optional<ParsedCall> CallFromJsonObject(const nlohmann::ordered_json& object, bool exact_keys);

enum class CallIdStyle {
  kOpenAi,   // "call_" + 24 alphanumeric characters
  kMistral,  // 9 alphanumeric characters (Mistral's templates refuse other ids)
};

// Numbers a choice's calls and gives them ids, random from the seed and unique within the choice.
//
// Emission scheme (all formats): a call is reported once, complete, as ONE ToolCallPart that carries its index
// (0, 1, 2, ... in order within the choice), a new id, the name and the whole arguments (a compact JSON object's
// text). No later part repeats an index.
class CallEmitter {
 public:
  CallEmitter(CallIdStyle style, uint64_t seed);
  void Emit(ParsedCall call, TypedDelta& out);
  uint32_t num_calls() const { return num_calls_; }

 private:
  std::string NewId();

  const CallIdStyle style_;
  std::mt19937_64 random_;
  std::unordered_set<std::string> ids_;
  uint32_t num_calls_ = 0;
};

// Formats whose calls sit in marked blocks: `block_begin` BLOCK `block_end`, the blocks either standing alone in the
// text (hermes: text between and around them is content) or grouped in a section `section_begin` blocks
// `section_end` (DeepSeek) where only whitespace may separate them. A block or section that does not read as calls
// comes back as content, markers included, exactly as generated. Whitespace right after a call (or a section of
// calls) is dropped when another call or the end follows, and is content otherwise.
struct BlockMarkers {
  std::string section_begin;  // empty: no sections
  std::string section_end;
  std::string block_begin;
  std::string block_end;
};

class BlockCallParser : public ToolCallParser {
 public:
  BlockCallParser(BlockMarkers markers, ToolCallParserOptions options);

  void Add(std::string_view text, TypedDelta& out) override;
  void Finish(TypedDelta& out) override;
  uint32_t num_calls() const override { return emitter_.num_calls(); }

 protected:
  // The calls one block's text (between its markers) stands for; nullopt or empty when it is malformed.
  virtual std::optional<std::vector<ParsedCall>> ParseBlock(std::string_view block) const = 0;
  const std::vector<FunctionTool>& tools() const { return tools_; }

 private:
  enum class State { kText, kSection, kBlock };

  void Run(TypedDelta& out);
  // Each returns false when it needs more text.
  bool StepText(TypedDelta& out);
  bool StepSection(TypedDelta& out);
  bool StepBlock(TypedDelta& out);
  const std::string& OpeningMarker() const;

  const BlockMarkers markers_;
  const std::vector<FunctionTool> tools_;
  CallEmitter emitter_;
  State state_ = State::kText;
  std::string buffer_;      // text not yet decided
  std::string raw_;         // markers consumed for calls not reported yet: content if they fail
  size_t search_from_ = 0;  // in kBlock: where the end marker may start
  uint32_t section_calls_ = 0;
  bool after_call_ = false;  // in kText: right after a call or a section of calls
};

// Formats where the whole output is either calls or content (llama3_json, pythonic): text that starts (after
// whitespace) with one of `starts` is held to the end and parsed whole; other text passes through at once.
class WholeTextCallParser : public ToolCallParser {
 public:
  WholeTextCallParser(std::vector<std::string> starts, CallIdStyle style, ToolCallParserOptions options);

  void Add(std::string_view text, TypedDelta& out) override;
  void Finish(TypedDelta& out) override;
  uint32_t num_calls() const override { return emitter_.num_calls(); }

 protected:
  // The calls the whole text (leading whitespace included) stands for; nullopt or empty: it is content.
  virtual std::optional<std::vector<ParsedCall>> ParseWhole(std::string_view text) const = 0;
  const std::vector<FunctionTool>& tools() const { return tools_; }

 private:
  enum class State { kUndecided, kContent, kCandidate };

  const std::vector<std::string> starts_;
  const std::vector<FunctionTool> tools_;
  CallEmitter emitter_;
  State state_ = State::kUndecided;
  std::string buffer_;
};

std::unique_ptr<ToolCallParser> MakeHermesParser(ToolCallParserOptions options);
std::unique_ptr<ToolCallParser> MakeLlama3JsonParser(ToolCallParserOptions options);
std::unique_ptr<ToolCallParser> MakeDeepSeekV3Parser(ToolCallParserOptions options);
std::unique_ptr<ToolCallParser> MakeDeepSeekV31Parser(ToolCallParserOptions options);
std::unique_ptr<ToolCallParser> MakeMistralParser(ToolCallParserOptions options);
std::unique_ptr<ToolCallParser> MakeQwen3CoderParser(ToolCallParserOptions options);
std::unique_ptr<ToolCallParser> MakePythonicParser(ToolCallParserOptions options);
std::unique_ptr<ToolCallParser> MakeHarmonyParser(ToolCallParserOptions options);

}  // namespace llmc::typed_output::internal

#endif  // LLMC_WORKER_TYPED_OUTPUT_CALL_PARSING_H_
