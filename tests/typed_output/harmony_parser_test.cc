// The harmony parser (gpt-oss): channels read as reasoning (analysis), content (final, commentary preambles) and
// calls (a message to functions.NAME), from text that begins after the prompt's <|start|>assistant and ends where
// the engine stripped the stop token (<|return|> or <|call|>), however the text arrives.
#include <random>
#include <string>
#include <vector>

#include "tests/support/catch.h"
#include "tests/typed_output/parser_test_util.h"

namespace llmc::typed_output {
namespace {

using testing::CheckScript;
using testing::Script;

constexpr char kWeatherTool[] =
    R"([{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
        "properties": {"location": {"type": "string"}}}}}])";

Script Harmony(std::string text, std::string content, std::string reasoning,
               std::vector<testing::ExpectedCall> calls = {}, bool tools = true) {
  Script script;
  script.format = ToolCallFormat::kHarmony;
  script.text = std::move(text);
  script.content = std::move(content);
  script.reasoning = std::move(reasoning);
  script.calls = std::move(calls);
  if (tools) script.tools_json = kWeatherTool;
  return script;
}

TEST_CASE("harmony: analysis is reasoning, final is content", "[unit][typed_output]") {
  CheckScript(
      Harmony("<|channel|>analysis<|message|>User greets. Reply.<|end|><|start|>assistant<|channel|>final"
              "<|message|>Hello! How can I help?",
              "Hello! How can I help?", "User greets. Reply."));
  CheckScript(Harmony("<|channel|>final<|message|>Just the answer.", "Just the answer.", ""));
  // A stop token that was not stripped (another stop sequence ended the text) is markup too.
  CheckScript(Harmony("<|channel|>final<|message|>Done.<|return|>", "Done.", ""));
  // Cut short inside the analysis (max_tokens): what came stays reasoning.
  CheckScript(Harmony("<|channel|>analysis<|message|>Thinking about <", "", "Thinking about <"));
  // A header cut short is markup: nothing comes of it.
  CheckScript(Harmony("<|channel|>analysis<|message|>x<|end|><|start|>assistant<|channel|>fin", "", "x"));
}

TEST_CASE("harmony: a message to functions.NAME is a call, with the recipient before or after the channel",
          "[unit][typed_output]") {
  CheckScript(
      Harmony("<|channel|>analysis<|message|>Need the weather.<|end|><|start|>assistant<|channel|>commentary "
              "to=functions.get_weather <|constrain|>json<|message|>{\"location\": \"Paris\"}",
              "", "Need the weather.", {{"get_weather", R"({"location": "Paris"})"}}));
  CheckScript(Harmony(" to=functions.get_weather<|channel|>commentary json<|message|>{\"location\":\"Oslo\"}<|call|>",
                      "", "", {{"get_weather", R"({"location": "Oslo"})"}}));
  // A preamble on the commentary channel, then the call.
  CheckScript(
      Harmony("<|channel|>commentary<|message|>Checking the weather.<|end|><|start|>assistant<|channel|>"
              "commentary to=functions.get_weather <|constrain|>json<|message|>{}",
              "Checking the weather.", "", {{"get_weather", "{}"}}));
}

TEST_CASE("harmony: a malformed call, or one without tools, comes back as content", "[unit][typed_output]") {
  CheckScript(Harmony("<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"location\": ",
                      "{\"location\": ", ""));
  CheckScript(Harmony("<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>[1, 2]<|call|>",
                      "[1, 2]", ""));
  CheckScript(Harmony("<|channel|>commentary to=functions.get_weather<|message|>{\"location\": \"Rome\"}",
                      "{\"location\": \"Rome\"}", "", {}, /*tools=*/false));
  // A function the request did not offer.
  CheckScript(Harmony("<|channel|>commentary to=functions.get_time <|constrain|>json<|message|>{}", "{}", ""));
  // Text outside any message, text without harmony's markup (a model that does not write it), and a header
  // that never ends are content too.
  CheckScript(Harmony("Hello world", "Hello world", ""));
  CheckScript(Harmony(std::string(300, 'w') + "<|channel|>final<|message|>x",
                      std::string(300, 'w') + "<|channel|>final<|message|>x", ""));
  CheckScript(Harmony("<|channel|>final<|message|>a<|end|>stray", "astray", ""));
  CheckScript(Harmony(std::string(5000, 'h'), std::string(5000, 'h'), ""));
  // Near the limits, wherever the text is cut: a special token at byte 255 keeps a header possible, a <|message|>
  // ending past 4096 bytes does not make one.
  CheckScript(Harmony(std::string(255, 'a') + "<|channel|>final<|message|>b", "b", ""));
  const std::string long_header = "<|channel|>final" + std::string(4080, ' ') + "<|message|>c";
  CheckScript(Harmony(long_header, long_header, ""));
}

TEST_CASE("harmony: without separate reasoning the analysis channel is content", "[unit][typed_output]") {
  ToolCallParserOptions options;
  options.separate_reasoning = false;
  ChoiceOutputParser parser({}, false, MakeToolCallParser(ToolCallFormat::kHarmony, std::move(options)));
  TypedDelta delta =
      parser.Add("<|channel|>analysis<|message|>Hmm.<|end|><|start|>assistant<|channel|>final<|message|> Yes.");
  delta.Append(parser.Finish());
  CHECK(delta.content == "Hmm. Yes.");
  CHECK(delta.reasoning.empty());
}

TEST_CASE("harmony: random messages and near-misses, any cuts: the same result, markup only removed",
          "[unit][typed_output]") {
  const std::vector<std::string> pieces = {"<|start|>",
                                           "<|end|>",
                                           "<|message|>",
                                           "<|channel|>",
                                           "<|constrain|>",
                                           "<|call|>",
                                           "<|return|>",
                                           "<|st",
                                           "assistant",
                                           "analysis",
                                           "final",
                                           "commentary",
                                           " to=functions.get_weather",
                                           " to=functions.",
                                           "json",
                                           "{\"location\": \"x\"}",
                                           "{",
                                           "}",
                                           "text ",
                                           "\n",
                                           "<",
                                           "|>"};
  const std::vector<std::string> messages = {
      "<|channel|>analysis<|message|>think<|end|><|start|>assistant", "<|channel|>final<|message|>answer",
      "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"location\": \"Paris\"}<|call|>",
      " to=functions.get_weather<|channel|>commentary json<|message|>{}<|end|><|start|>assistant"};
  std::mt19937 random(99);
  int with_calls = 0;
  for (int round = 0; round < 400; ++round) {
    Script script = Harmony("", "", "");
    const int segments = 1 + static_cast<int>(random() % 4);
    for (int i = 0; i < segments; ++i) {
      std::string part = random() % 2 == 0 ? messages[random() % messages.size()] : pieces[random() % pieces.size()];
      if (random() % 4 == 0) part.insert(random() % (part.size() + 1), pieces[random() % pieces.size()]);
      script.text += part;
    }
    INFO("text: " << script.text);
    const testing::Parsed whole = testing::Feed(script, {});
    with_calls += whole.calls.empty() ? 0 : 1;
    CHECK(whole.content.size() + whole.reasoning.size() <= script.text.size());
    for (const ToolCallPart& call : whole.calls) {
      CHECK(call.name == "get_weather");
      CHECK(nlohmann::json::parse(call.arguments, nullptr, false).is_object());
    }
    testing::CheckIds(whole.calls, ToolCallFormat::kHarmony);
    std::vector<size_t> bytes;
    for (size_t cut = 1; cut < script.text.size(); ++cut) bytes.push_back(cut);
    CHECK(testing::SameParts(testing::Feed(script, bytes), whole));
  }
  CHECK(with_calls >= 40);
}

}  // namespace
}  // namespace llmc::typed_output
