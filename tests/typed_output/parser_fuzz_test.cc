// Random texts built from each format's pieces (markers, halves of markers, JSON, whitespace, other text): however
// a text is cut, the parser gives the same result; when it reports no call nothing was dropped (the content is the
// text); every call has valid JSON object arguments and a well-formed, unique id.

#include <random>
#include <string>
#include <vector>

#include "tests/support/catch.h"
#include "tests/typed_output/parser_test_util.h"

namespace llmc::typed_output {
namespace {

using testing::Parsed;
using testing::Script;

struct Alphabet {
  ToolCallFormat format;
  std::vector<std::string> pieces;  // markers, halves of markers and other bits of the format
  std::vector<std::string> calls;   // well-formed calls
  bool whole = false;               // the whole output is calls or content (llama3_json, pythonic)
};

std::vector<Alphabet> Alphabets() {
  const std::vector<std::string> common = {" ",  "\n", "a", "Hi", "é", "→", "{", "}",
                                           "\"", ":",  ",", "[",  "]", "<", ">"};
  const std::string calls_begin = "<｜tool▁calls▁begin｜>";
  const std::string calls_end = "<｜tool▁calls▁end｜>";
  const std::string call_begin = "<｜tool▁call▁begin｜>";
  const std::string call_end = "<｜tool▁call▁end｜>";
  const std::string sep = "<｜tool▁sep｜>";
  std::vector<Alphabet> alphabets = {
      {ToolCallFormat::kHermes,
       {"<tool_call>", "</tool_call>", "<tool_", "</tool", "{\"name\": \"f\", \"arguments\": {\"a\": 1}}",
        "{\"name\": \"g\"}", "{\"name\": \"h\", \"arguments\": {"},
       {"<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}}\n</tool_call>",
        "<tool_call>{\"name\": \"g\", \"arguments\": {}}</tool_call>"}},
      {ToolCallFormat::kQwen3CoderXml,
       {"<tool_call>", "</tool_call>", "<function=f>", "</function>", "<parameter=p>", "</parameter>", "\n1\n",
        "<parameter=q>\nv\n</parameter>", "<function="},
       {"<tool_call>\n<function=f>\n<parameter=p>\n1\n</parameter>\n</function>\n</tool_call>",
        "<tool_call><function=g></function></tool_call>"}},
      {ToolCallFormat::kLlama3Json,
       {"<|python_tag|>", "<|python", "{\"name\": \"f\", \"parameters\": {}}", ";",
        "{\"name\": \"g\", \"arguments\": ", "{\"x\": [1]}"},
       {"{\"name\": \"f\", \"parameters\": {\"a\": 1}}",
        "<|python_tag|>{\"name\": \"g\", \"arguments\": {}}; {\"name\": \"h\", \"parameters\": {\"s\": \";\"}}"},
       true},
      {ToolCallFormat::kPythonic,
       {"[", "]", "f(", ")", "a=1", "b='x'", "g()", "c=True", "(", "=", "None"},
       {"[f(a=1, b='x')]", "[g(), h(c=[1, {'k': None}])]"},
       true},
      {ToolCallFormat::kMistral,
       {"[TOOL_CALLS]", "[TOOL_", "f[ARGS]", "[ARGS]", "[CALL_ID]abc", "{\"a\": 1}", "{}",
        "[{\"name\": \"f\", \"arguments\": {}}]", "g"},
       {"[TOOL_CALLS]f[ARGS]{\"a\": 1}", "[TOOL_CALLS][{\"name\": \"g\", \"arguments\": {}}]", "h[ARGS]{}"}},
      {ToolCallFormat::kDeepSeekV3,
       {calls_begin, calls_end, call_begin, call_end, sep, "function", "f\n```json\n{\"a\": 1}\n```", "<｜tool▁ca",
        "```"},
       {calls_begin + call_begin + "function" + sep + "f\n```json\n{\"a\": 1}\n```" + call_end + calls_end,
        calls_begin + call_begin + "function" + sep + "g\n```json\n{}\n```" + call_end + "\n" + call_begin +
            "function" + sep + "h\n```json\n{\"b\": []}\n```" + call_end + calls_end}},
      {ToolCallFormat::kDeepSeekV31,
       {calls_begin, calls_end, call_begin, call_end, sep, "f", "{\"a\": [1, \"}\"]}", "<｜tool▁", "{}"},
       {calls_begin + call_begin + "f" + sep + "{\"a\": 1}" + call_end + calls_end,
        calls_begin + call_begin + "g" + sep + "{}" + call_end + call_begin + "h" + sep + "{\"b\": \"x\"}" + call_end}},
  };
  for (Alphabet& alphabet : alphabets) alphabet.pieces.insert(alphabet.pieces.end(), common.begin(), common.end());
  return alphabets;
}

// A well-formed call, or one with a random piece put in somewhere, or cut short.
std::string RandomCall(const Alphabet& alphabet, std::mt19937& random) {
  std::string call = alphabet.calls[random() % alphabet.calls.size()];
  switch (random() % 6) {
    case 0:
      call.insert(random() % (call.size() + 1), alphabet.pieces[random() % alphabet.pieces.size()]);
      break;
    case 1:
      call.resize(random() % call.size());
      break;
    default:
      break;
  }
  return call;
}

// Calls, near-miss calls and other pieces, in any order; for the whole-text formats mostly one (near-miss) call.
std::string RandomText(const Alphabet& alphabet, std::mt19937& random) {
  if (alphabet.whole && random() % 2 == 0) return (random() % 3 == 0 ? " \n" : "") + RandomCall(alphabet, random);
  std::string text;
  const int segments = 1 + static_cast<int>(random() % 5);
  for (int i = 0; i < segments; ++i) {
    if (random() % 2 == 0) {
      text += RandomCall(alphabet, random);
      continue;
    }
    const int pieces = 1 + static_cast<int>(random() % 3);
    for (int j = 0; j < pieces; ++j) text += alphabet.pieces[random() % alphabet.pieces.size()];
  }
  return text;
}

std::vector<size_t> RandomCuts(size_t size, std::mt19937& random) {
  std::vector<size_t> cuts;
  for (size_t at = 0; at < size;) {
    at += 1 + random() % 7;
    if (at < size) cuts.push_back(at);
  }
  return cuts;
}

void CheckRandomTexts(bool with_reasoning) {
  std::mt19937 random(with_reasoning ? 7 : 1234);
  for (const Alphabet& alphabet : Alphabets()) {
    int with_calls = 0;
    for (int round = 0; round < 400; ++round) {
      Script script;
      script.format = alphabet.format;
      script.text = RandomText(alphabet, random);
      if (with_reasoning) {
        script.markers = testing::Think();
        const std::string head[] = {"<think>", "", "<think>x</think>", "</think>", "<thi"};
        script.text = head[random() % 5] + script.text;
      }
      INFO("format " << ToolCallFormatName(alphabet.format) << " text: " << script.text);
      const Parsed whole = testing::Feed(script, {});
      with_calls += whole.calls.empty() ? 0 : 1;
      if (!with_reasoning && whole.calls.empty()) CHECK(whole.content == script.text);
      if (with_reasoning && whole.calls.empty() && whole.reasoning.empty()) {
        // Only the markers of a block and the newlines after it may be gone.
        CHECK(whole.content.size() <= script.text.size());
      }
      for (const ToolCallPart& call : whole.calls) {
        const nlohmann::json arguments = nlohmann::json::parse(call.arguments, nullptr, false);
        CHECK(arguments.is_object());
        CHECK_FALSE(call.name.empty());
      }
      testing::CheckIds(whole.calls, alphabet.format);
      std::vector<size_t> bytes;
      for (size_t cut = 1; cut < script.text.size(); ++cut) bytes.push_back(cut);
      for (const std::vector<size_t>& cuts : {bytes, RandomCuts(script.text.size(), random)}) {
        const Parsed split = testing::Feed(script, cuts);
        CHECK(split.content == whole.content);
        CHECK(split.reasoning == whole.reasoning);
        CHECK(testing::SameParts(split, whole));
      }
    }
    // The texts exercise the calls too, not only the content.
    INFO("format " << ToolCallFormatName(alphabet.format) << ": " << with_calls << " of 400 texts with calls");
    CHECK(with_calls >= 40);
  }
}

TEST_CASE("fuzz: every format, random texts, any cuts: same result, nothing lost", "[unit][typed_output]") {
  CheckRandomTexts(/*with_reasoning=*/false);
}

TEST_CASE("fuzz: the same behind reasoning markers", "[unit][typed_output]") {
  CheckRandomTexts(/*with_reasoning=*/true);
}

}  // namespace
}  // namespace llmc::typed_output
