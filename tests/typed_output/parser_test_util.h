#ifndef LLMC_TESTS_TYPED_OUTPUT_PARSER_TEST_UTIL_H_
#define LLMC_TESTS_TYPED_OUTPUT_PARSER_TEST_UTIL_H_

// Scripted model outputs fed to a ChoiceOutputParser whole, split at every byte boundary (and at every pair of
// boundaries for short texts) and one byte at a time: every way must give the same content, reasoning and calls,
// and those must be the expected ones.

#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "nlohmann/json.hpp"
#include "tests/support/catch.h"
#include "worker/typed_output/output_format.h"
#include "worker/typed_output/output_parser.h"

namespace llmc::typed_output::testing {

struct ExpectedCall {
  std::string name;
  std::string arguments;  // JSON text, compared as JSON values
};

struct Script {
  ToolCallFormat format = ToolCallFormat::kNone;
  std::string text;
  std::string content;
  std::string reasoning;
  std::vector<ExpectedCall> calls;
  ReasoningMarkers markers;
  bool starts_in_reasoning = false;
  std::string tools_json;  // the request's `tools`
};

struct Parsed {
  std::string content;
  std::string reasoning;
  std::vector<ToolCallPart> calls;
};

inline ReasoningMarkers Think() { return ReasoningMarkers{"<think>", "</think>"}; }

inline std::unique_ptr<ChoiceOutputParser> MakeParser(const Script& script, uint64_t seed = 42) {
  ToolCallParserOptions options;
  options.id_seed = seed;
  if (!script.tools_json.empty()) {
    auto tools = ReadFunctionTools(script.tools_json);
    REQUIRE(tools.ok());
    options.tools = *tools;
  }
  return std::make_unique<ChoiceOutputParser>(script.markers, script.starts_in_reasoning,
                                              MakeToolCallParser(script.format, std::move(options)));
}

inline void Collect(const TypedDelta& delta, Parsed& parsed) {
  parsed.content += delta.content;
  parsed.reasoning += delta.reasoning;
  for (const ToolCallPart& part : delta.tool_calls) parsed.calls.push_back(part);
}

// Feeds the text cut at `cuts` (ascending offsets).
inline Parsed Feed(const Script& script, const std::vector<size_t>& cuts) {
  std::unique_ptr<ChoiceOutputParser> parser = MakeParser(script);
  Parsed parsed;
  size_t from = 0;
  for (size_t cut : cuts) {
    Collect(parser->Add(std::string_view(script.text).substr(from, cut - from)), parsed);
    from = cut;
  }
  Collect(parser->Add(std::string_view(script.text).substr(from)), parsed);
  Collect(parser->Finish(), parsed);
  return parsed;
}

inline bool IsAlnum(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'); }

inline bool AllAlnum(std::string_view text) {
  for (char c : text) {
    if (!IsAlnum(c)) return false;
  }
  return true;
}

inline void CheckIds(const std::vector<ToolCallPart>& calls, ToolCallFormat format) {
  std::set<std::string> ids;
  for (const ToolCallPart& call : calls) {
    INFO("id " << call.id);
    if (format == ToolCallFormat::kMistral) {
      CHECK(call.id.size() == 9);
      CHECK(AllAlnum(call.id));
    } else {
      CHECK(call.id.size() == 29);
      CHECK(call.id.rfind("call_", 0) == 0);
      CHECK(AllAlnum(std::string_view(call.id).substr(5)));
    }
    CHECK(ids.insert(call.id).second);
  }
}

inline void CheckExpected(const Script& script, const Parsed& parsed) {
  CHECK(parsed.content == script.content);
  CHECK(parsed.reasoning == script.reasoning);
  REQUIRE(parsed.calls.size() == script.calls.size());
  for (size_t i = 0; i < parsed.calls.size(); ++i) {
    const ToolCallPart& call = parsed.calls[i];
    CHECK(call.index == i);
    CHECK(call.name == script.calls[i].name);
    const nlohmann::json arguments = nlohmann::json::parse(call.arguments, nullptr, false);
    REQUIRE_FALSE(arguments.is_discarded());
    CHECK(arguments.is_object());
    CHECK(arguments == nlohmann::json::parse(script.calls[i].arguments));
  }
  CheckIds(parsed.calls, script.format);
}

inline bool SameParts(const Parsed& a, const Parsed& b) {
  if (a.content != b.content || a.reasoning != b.reasoning || a.calls.size() != b.calls.size()) return false;
  for (size_t i = 0; i < a.calls.size(); ++i) {
    if (a.calls[i].index != b.calls[i].index || a.calls[i].id != b.calls[i].id || a.calls[i].name != b.calls[i].name ||
        a.calls[i].arguments != b.calls[i].arguments) {
      return false;
    }
  }
  return true;
}

inline void Describe(const Parsed& parsed, std::string& out) {
  out += "content=[" + parsed.content + "] reasoning=[" + parsed.reasoning + "] calls:";
  for (const ToolCallPart& call : parsed.calls) out += " " + call.name + call.arguments;
}

// The script's expectations hold whole, at every single cut, at every pair of cuts (short texts) and byte by byte.
inline void CheckScript(const Script& script) {
  INFO("text: " << script.text);
  const Parsed whole = Feed(script, {});
  CheckExpected(script, whole);
  const size_t size = script.text.size();
  auto check_same = [&](const std::vector<size_t>& cuts) {
    const Parsed split = Feed(script, cuts);
    if (SameParts(whole, split)) return true;
    std::string message = "cuts:";
    for (size_t cut : cuts) message += " " + std::to_string(cut);
    message += "\nwhole: ";
    Describe(whole, message);
    message += "\nsplit: ";
    Describe(split, message);
    FAIL_CHECK(message);
    return false;
  };
  for (size_t cut = 0; cut <= size; ++cut) {
    if (!check_same({cut})) return;
  }
  if (size <= 160) {
    for (size_t first = 1; first < size; ++first) {
      for (size_t second = first + 1; second < size; ++second) {
        if (!check_same({first, second})) return;
      }
    }
  }
  std::vector<size_t> bytes;
  for (size_t cut = 1; cut < size; ++cut) bytes.push_back(cut);
  check_same(bytes);
}

}  // namespace llmc::typed_output::testing

#endif  // LLMC_TESTS_TYPED_OUTPUT_PARSER_TEST_UTIL_H_
