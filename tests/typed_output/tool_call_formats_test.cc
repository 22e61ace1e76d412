// The llama3_json, pythonic, mistral and DeepSeek tool-call parsers (hermes and Qwen3-Coder are in
// output_parser_test.cc).

#include <string>
#include <vector>

#include "tests/support/catch.h"
#include "tests/typed_output/parser_test_util.h"

namespace llmc::typed_output {
namespace {

using testing::CheckScript;
using testing::Feed;
using testing::MakeParser;
using testing::Parsed;
using testing::Script;

Script Make(ToolCallFormat format, std::string text, std::string content,
            std::vector<testing::ExpectedCall> calls = {}) {
  Script script;
  script.format = format;
  script.text = std::move(text);
  script.content = std::move(content);
  script.calls = std::move(calls);
  return script;
}

// The text comes back as content, unchanged.
Script Content(ToolCallFormat format, std::string text) {
  Script script = Make(format, text, text);
  return script;
}

// Feeds `text` in 64 KiB pieces: the parser must release it as content before the end.
void CheckGivesUpLargeCall(ToolCallFormat format, const std::string& head, const std::string& tail) {
  Script script = Make(format, "", "");
  std::unique_ptr<ChoiceOutputParser> parser = MakeParser(script);
  Parsed parsed;
  std::string fed = head;
  testing::Collect(parser->Add(head), parsed);
  const std::string chunk(64 * 1024, 'x');
  for (int i = 0; i < 20; ++i) {
    testing::Collect(parser->Add(chunk), parsed);
    fed += chunk;
  }
  CHECK(parsed.content.size() > (1u << 20));
  testing::Collect(parser->Add(tail), parsed);
  testing::Collect(parser->Finish(), parsed);
  fed += tail;
  CHECK(parsed.content == fed);
  CHECK(parsed.calls.empty());
}

// ---- llama3_json ----

TEST_CASE("llama3_json: the whole output as JSON calls", "[unit][typed_output]") {
  CheckScript(Make(ToolCallFormat::kLlama3Json,
                   "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\", \"days\": 2}}", "",
                   {{"get_weather", R"({"city":"Paris","days":2})"}}));
  CheckScript(Make(ToolCallFormat::kLlama3Json,
                   " <|python_tag|>{\"name\": \"a\", \"arguments\": {}}; {\"name\": \"b\", \"parameters\": {\"x\": "
                   "[1, \"};\"]}}\n",
                   "", {{"a", "{}"}, {"b", R"({"x":[1,"};"]})"}}));
  CheckScript(Make(ToolCallFormat::kLlama3Json, "{\"name\":\"a\",\"parameters\":{}};{\"name\":\"b\",\"parameters\":{}}",
                   "", {{"a", "{}"}, {"b", "{}"}}));
}

TEST_CASE("llama3_json: anything else is content", "[unit][typed_output]") {
  CheckScript(Content(ToolCallFormat::kLlama3Json, "  {\"name\": \"a\", \"parameters\": {}, \"extra\": 1}"));
  CheckScript(Content(ToolCallFormat::kLlama3Json, "{\"not\": \"a call\"}"));
  CheckScript(Content(ToolCallFormat::kLlama3Json, "{\"name\": \"a\", \"parameters\": {}} trailing"));
  CheckScript(Content(ToolCallFormat::kLlama3Json, "{\"name\": \"a\", \"parameters\": []}"));
  CheckScript(Content(ToolCallFormat::kLlama3Json, "{\"name\": \"a\", \"parameters\": {}}; {\"name\": 1}"));
  CheckScript(Content(ToolCallFormat::kLlama3Json, "<|python_tag|>print(1)"));
  CheckScript(Content(ToolCallFormat::kLlama3Json, "{\"name\": \"a\", \"parameters\": {"));  // unfinished
  CheckScript(Content(ToolCallFormat::kLlama3Json, "Hello {\"name\": \"a\", \"parameters\": {}}"));
  CheckScript(Content(ToolCallFormat::kLlama3Json, "<|python"));
}

TEST_CASE("llama3_json: plain text passes through at once", "[unit][typed_output]") {
  std::unique_ptr<ChoiceOutputParser> parser = MakeParser(Make(ToolCallFormat::kLlama3Json, "", ""));
  CHECK(parser->Add("  ").empty());
  CHECK(parser->Add("Hi").content == "  Hi");
  CHECK(parser->Add(" {\"name\"").content == " {\"name\"");
  CHECK(parser->Finish().empty());

  std::unique_ptr<ChoiceOutputParser> tagged = MakeParser(Make(ToolCallFormat::kLlama3Json, "", ""));
  CHECK(tagged->Add("<|py").empty());
  CHECK(tagged->Add("thon_tag|>{\"name\": \"f\", \"parameters\": {}}").empty());
  const TypedDelta end = tagged->Finish();
  REQUIRE(end.tool_calls.size() == 1);
  CHECK(end.tool_calls[0].name == "f");
  CHECK(end.content.empty());
  CHECK(tagged->made_tool_calls());
}

TEST_CASE("whitespace: a long run before a marker is content, however the text arrives", "[unit][typed_output]") {
  const std::string spaces(5000, '\n');
  const std::string call = "{\"name\": \"f\", \"parameters\": {}}";
  CheckScript(Content(ToolCallFormat::kLlama3Json, spaces + call));
  CheckScript(Make(ToolCallFormat::kLlama3Json, "\n\n" + call, "", {{"f", "{}"}}));
  const std::string hermes = "<tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>";
  CheckScript(Make(ToolCallFormat::kHermes, hermes + spaces + hermes, spaces, {{"f", "{}"}, {"f", "{}"}}));
  CheckScript(Make(ToolCallFormat::kMistral, "[TOOL_CALLS]f[ARGS]{}" + spaces + "[TOOL_CALLS]g[ARGS]{}", spaces,
                   {{"f", "{}"}, {"g", "{}"}}));
  CheckScript(Make(ToolCallFormat::kMistral, "[TOOL_CALLS]f[ARGS]{}" + spaces + "g[ARGS]{}", spaces + "g[ARGS]{}",
                   {{"f", "{}"}}));
}

TEST_CASE("llama3_json: a candidate larger than 1 MiB is given up as content", "[unit][typed_output]") {
  CheckGivesUpLargeCall(ToolCallFormat::kLlama3Json, "{\"name\": \"f\", \"parameters\": {\"s\": \"", "\"}}");
}

// ---- pythonic ----

TEST_CASE("pythonic: a Python list of calls, literals converted to JSON", "[unit][typed_output]") {
  CheckScript(Make(ToolCallFormat::kPythonic,
                   "[get_weather(city=\"San Francisco\", days=3), get_time(tz='UTC', precise=True, extra=None, "
                   "ratio=-1.5e3, items=[1, 'a', false], cfg={'k': (1, 2), 3: null})]",
                   "",
                   {{"get_weather", R"({"city":"San Francisco","days":3})"},
                    {"get_time",
                     R"({"tz":"UTC","precise":true,"extra":null,"ratio":-1500.0,"items":[1,"a",false],
                         "cfg":{"k":[1,2],"3":null}})"}}));
  CheckScript(Make(ToolCallFormat::kPythonic, "\n[f()]\n", "", {{"f", "{}"}}));
  CheckScript(Make(ToolCallFormat::kPythonic, "[f(s=\"a\\\"b\\n\\u00e9\", t='it\\'s', u=.5, v=2., w='''x\ny'''),]", "",
                   {{"f", R"({"s":"a\"b\né","t":"it's","u":0.5,"v":2.0,"w":"x\ny"})"}}));
  CheckScript(Make(ToolCallFormat::kPythonic, "<|python_start|>[tools.search(q=\"x\")]<|python_end|>", "",
                   {{"tools.search", R"({"q":"x"})"}}));
}

TEST_CASE("pythonic: anything else is content", "[unit][typed_output]") {
  CheckScript(Content(ToolCallFormat::kPythonic, "[1, 2, 3] is a list"));
  CheckScript(Content(ToolCallFormat::kPythonic, "[f(1)]"));  // positional arguments
  CheckScript(Content(ToolCallFormat::kPythonic, "Sure: [f()]"));
  CheckScript(Content(ToolCallFormat::kPythonic, "[f(a=1"));  // unfinished
  CheckScript(Content(ToolCallFormat::kPythonic, "[f(a=1)] and more"));
  CheckScript(Content(ToolCallFormat::kPythonic, "[f(a=x)]"));
  CheckScript(Content(ToolCallFormat::kPythonic, "[f(a=01)]"));
  CheckScript(Content(ToolCallFormat::kPythonic, "[f(a='unterminated)]"));
  CheckScript(Content(ToolCallFormat::kPythonic, "[]"));
  CheckScript(Content(ToolCallFormat::kPythonic, "  "));
}

TEST_CASE("pythonic: a candidate larger than 1 MiB is given up as content", "[unit][typed_output]") {
  CheckGivesUpLargeCall(ToolCallFormat::kPythonic, "[f(s=\"", "\")]");
}

// ---- mistral ----

TEST_CASE("mistral: [TOOL_CALLS] with a JSON array of calls", "[unit][typed_output]") {
  CheckScript(Make(ToolCallFormat::kMistral,
                   "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}, {\"name\": "
                   "\"get_time\", \"arguments\": {}}]",
                   "", {{"get_weather", R"({"city":"Paris"})"}, {"get_time", "{}"}}));
  CheckScript(Make(ToolCallFormat::kMistral,
                   "Sure.[TOOL_CALLS] [{\"name\": \"f\", \"arguments\": \"{\\\"a\\\": \\\"]\\\"}\"}]", "Sure.",
                   {{"f", R"({"a":"]"})"}}));
}

TEST_CASE("mistral: name[ARGS]{...} calls, introduced by [TOOL_CALLS] or directly", "[unit][typed_output]") {
  CheckScript(Make(ToolCallFormat::kMistral,
                   "[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Paris\"}[TOOL_CALLS]get_time[ARGS]{}", "",
                   {{"get_weather", R"({"city":"Paris"})"}, {"get_time", "{}"}}));
  CheckScript(Make(ToolCallFormat::kMistral,
                   "Checking. [TOOL_CALLS]get_weather[ARGS]{\"city\": \"Paris\"}get_time[ARGS]{\"tz\": \"UTC\"}",
                   "Checking. ", {{"get_weather", R"({"city":"Paris"})"}, {"get_time", R"({"tz":"UTC"})"}}));
  CheckScript(Make(ToolCallFormat::kMistral, "[TOOL_CALLS]f[CALL_ID]abc123XYZ[ARGS]{\"a\": [1, \"}\"]}", "",
                   {{"f", R"({"a":[1,"}"]})"}}));
  // Text after the calls is content; whitespace alone is not.
  CheckScript(Make(ToolCallFormat::kMistral, "[TOOL_CALLS]f[ARGS]{}\n\nDone.", "\n\nDone.", {{"f", "{}"}}));
  CheckScript(Make(ToolCallFormat::kMistral, "[TOOL_CALLS]f[ARGS]{}\n [TOOL_CALLS]g[ARGS]{} \n", "",
                   {{"f", "{}"}, {"g", "{}"}}));
  CheckScript(Make(ToolCallFormat::kMistral, "[TOOL_CALLS]f[ARGS]{}Done", "Done", {{"f", "{}"}}));
}

TEST_CASE("mistral: malformed or unfinished calls come back as content", "[unit][typed_output]") {
  CheckScript(Content(ToolCallFormat::kMistral, "[TOOL_CALLS]f[ARGS]{\"a\": } tail"));
  CheckScript(Content(ToolCallFormat::kMistral, "[TOOL_CALLS] hello world"));
  CheckScript(Content(ToolCallFormat::kMistral, "[TOOL_CALLS]f[ARGS]{\"a\": 1"));
  CheckScript(Content(ToolCallFormat::kMistral, "[TOOL_CALLS][{\"arguments\": {}}]"));
  CheckScript(Content(ToolCallFormat::kMistral, "[TOOL_CALLS]f[ARG"));
  CheckScript(Content(ToolCallFormat::kMistral, "a [TOOL_CALL"));
  CheckScript(Content(ToolCallFormat::kMistral, "[TOOL_CALLS]f[ARGS][1]"));
  // After a good call, a bad one is content and the good one stays.
  CheckScript(Make(ToolCallFormat::kMistral, "[TOOL_CALLS]f[ARGS]{}[TOOL_CALLS]g[ARGS]{x}", "[TOOL_CALLS]g[ARGS]{x}",
                   {{"f", "{}"}}));
}

TEST_CASE("mistral: text after a call that looks like a name is held only so long", "[unit][typed_output]") {
  const std::string word(5000, 'w');
  std::unique_ptr<ChoiceOutputParser> parser = MakeParser(Make(ToolCallFormat::kMistral, "", ""));
  TypedDelta delta = parser->Add("[TOOL_CALLS]f[ARGS]{}");
  CHECK(delta.tool_calls.size() == 1);
  delta = parser->Add(word);
  CHECK(delta.content == word);
  CHECK(parser->Add("[ARGS]{}").content == "[ARGS]{}");
  CHECK(parser->Finish().empty());
  CheckScript(
      Make(ToolCallFormat::kMistral, "[TOOL_CALLS]f[ARGS]{}" + word + "[ARGS]{}", word + "[ARGS]{}", {{"f", "{}"}}));
}

TEST_CASE("mistral: call ids are 9 alphanumerics, several calls in one delta", "[unit][typed_output]") {
  std::unique_ptr<ChoiceOutputParser> parser = MakeParser(Make(ToolCallFormat::kMistral, "", ""));
  const TypedDelta delta = parser->Add("[TOOL_CALLS]a[ARGS]{}[TOOL_CALLS]b[ARGS]{}c[ARGS]{\"k\": 1}");
  REQUIRE(delta.tool_calls.size() == 3);
  testing::CheckIds(delta.tool_calls, ToolCallFormat::kMistral);
  CHECK(delta.tool_calls[2].name == "c");
  CHECK(delta.tool_calls[2].index == 2);
  CHECK(delta.tool_calls[2].arguments == R"({"k":1})");
  CHECK(parser->Finish().empty());
}

TEST_CASE("mistral: a call larger than 1 MiB is given up as content", "[unit][typed_output]") {
  CheckGivesUpLargeCall(ToolCallFormat::kMistral, "[TOOL_CALLS]f[ARGS]{\"s\": \"", "\"}");
  CheckGivesUpLargeCall(ToolCallFormat::kMistral, "[TOOL_CALLS][{\"name\": \"f\", \"arguments\": {\"s\": \"", "\"}}]");
}

// ---- deepseek_v3 ----

const std::string kCallsBegin = "<｜tool▁calls▁begin｜>";
const std::string kCallsEnd = "<｜tool▁calls▁end｜>";
const std::string kCallBegin = "<｜tool▁call▁begin｜>";
const std::string kCallEnd = "<｜tool▁call▁end｜>";
const std::string kSep = "<｜tool▁sep｜>";

std::string V3Call(const std::string& name, const std::string& arguments) {
  return kCallBegin + "function" + kSep + name + "\n```json\n" + arguments + "\n```" + kCallEnd;
}

std::string V31Call(const std::string& name, const std::string& arguments) {
  return kCallBegin + name + kSep + arguments + kCallEnd;
}

TEST_CASE("deepseek_v3: calls in a section, fenced JSON arguments", "[unit][typed_output]") {
  CheckScript(Make(ToolCallFormat::kDeepSeekV3,
                   "Let me look." + kCallsBegin + V3Call("get_weather", "{\"city\": \"Paris\"}") + "\n" +
                       V3Call("get_time", "{}") + kCallsEnd,
                   "Let me look.", {{"get_weather", R"({"city":"Paris"})"}, {"get_time", "{}"}}));
  // Text after the section is content; a missing section end is forgiven.
  CheckScript(Make(ToolCallFormat::kDeepSeekV3, kCallsBegin + V3Call("f", "{\"a\": 1}") + kCallsEnd + "\nDone",
                   "\nDone", {{"f", R"({"a":1})"}}));
  CheckScript(Make(ToolCallFormat::kDeepSeekV3, kCallsBegin + V3Call("f", "{}") + "\n", "", {{"f", "{}"}}));
}

TEST_CASE("deepseek_v3: with reasoning first", "[unit][typed_output]") {
  Script script = Make(ToolCallFormat::kDeepSeekV3,
                       "<think>\nNeed the weather.\n</think>\n\n" + kCallsBegin +
                           V3Call("get_weather", "{\"city\": \"Zürich\"}") + kCallsEnd,
                       "", {{"get_weather", R"({"city":"Zürich"})"}});
  script.markers = testing::Think();
  script.reasoning = "\nNeed the weather.\n";
  CheckScript(script);
}

TEST_CASE("deepseek_v3: malformed or unfinished calls come back as content", "[unit][typed_output]") {
  const std::string bad = V3Call("g", "{bad}");
  CheckScript(Make(ToolCallFormat::kDeepSeekV3, kCallsBegin + V3Call("f", "{}") + "\n" + bad + kCallsEnd, "\n" + bad,
                   {{"f", "{}"}}));
  CheckScript(Content(ToolCallFormat::kDeepSeekV3, "x" + kCallsBegin + bad + kCallsEnd + "y"));
  CheckScript(
      Content(ToolCallFormat::kDeepSeekV3, kCallsBegin + kCallBegin + "function" + kSep + "f\n```json\n{\"a\":"));
  CheckScript(Content(ToolCallFormat::kDeepSeekV3, kCallsBegin + "not a call" + kCallsEnd));
  CheckScript(Content(ToolCallFormat::kDeepSeekV3, "half a marker <｜tool▁ca"));
  CheckScript(Content(ToolCallFormat::kDeepSeekV3, kCallsBegin + kCallsEnd));
}

// ---- deepseek_v31 ----

TEST_CASE("deepseek_v31: NAME<sep>{args} calls in a section", "[unit][typed_output]") {
  CheckScript(Make(ToolCallFormat::kDeepSeekV31,
                   "ok" + kCallsBegin + V31Call("get_weather", "{\"city\": \"Paris\"}") +
                       V31Call("get_time", "{\"tz\": \"UTC\"}") + kCallsEnd,
                   "ok", {{"get_weather", R"({"city":"Paris"})"}, {"get_time", R"({"tz":"UTC"})"}}));
  CheckScript(Make(ToolCallFormat::kDeepSeekV31, kCallsBegin + V31Call("f", "{}"), "", {{"f", "{}"}}));
  CheckScript(Content(ToolCallFormat::kDeepSeekV31, kCallsBegin + V31Call("", "{}") + kCallsEnd));
  CheckScript(Content(ToolCallFormat::kDeepSeekV31, kCallsBegin + V31Call("f", "[]") + kCallsEnd));
  CheckScript(Content(ToolCallFormat::kDeepSeekV31, kCallsBegin + kCallBegin + "f" + kSep + "{\"a\": 1}"));
}

TEST_CASE("deepseek_v31: a long run of whitespace inside a section ends it", "[unit][typed_output]") {
  const std::string spaces(5000, ' ');
  CheckScript(Make(ToolCallFormat::kDeepSeekV31, kCallsBegin + V31Call("f", "{}") + spaces + V31Call("g", "{}"),
                   spaces + V31Call("g", "{}"), {{"f", "{}"}}));
  CheckScript(Make(ToolCallFormat::kDeepSeekV31, kCallsBegin + V31Call("f", "{}") + "  " + V31Call("g", "{}"), "",
                   {{"f", "{}"}, {"g", "{}"}}));
}

TEST_CASE("deepseek_v31: several calls in one delta, a huge call is given up", "[unit][typed_output]") {
  std::unique_ptr<ChoiceOutputParser> parser = MakeParser(Make(ToolCallFormat::kDeepSeekV31, "", ""));
  const TypedDelta delta =
      parser->Add(kCallsBegin + V31Call("a", "{}") + V31Call("b", "{\"x\": 1}") + V31Call("c", "{}") + kCallsEnd);
  REQUIRE(delta.tool_calls.size() == 3);
  CHECK(delta.content.empty());
  CHECK(delta.tool_calls[1].arguments == R"({"x":1})");
  CHECK(parser->Finish().empty());
  CheckGivesUpLargeCall(ToolCallFormat::kDeepSeekV31, kCallsBegin + kCallBegin + "f" + kSep + "{\"s\": \"",
                        "\"}" + kCallEnd + kCallsEnd);
}

}  // namespace
}  // namespace llmc::typed_output
