// ChoiceOutputParser (reasoning apart from content) and the hermes and Qwen3-Coder tool-call parsers; the other
// formats are in tool_call_formats_test.cc.

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
using testing::Think;

Script Make(ToolCallFormat format, std::string text, std::string content,
            std::vector<testing::ExpectedCall> calls = {}) {
  Script script;
  script.format = format;
  script.text = std::move(text);
  script.content = std::move(content);
  script.calls = std::move(calls);
  return script;
}

Script Reasoned(std::string text, std::string reasoning, std::string content, bool starts_in_reasoning = false) {
  Script script;
  script.text = std::move(text);
  script.reasoning = std::move(reasoning);
  script.content = std::move(content);
  script.markers = Think();
  script.starts_in_reasoning = starts_in_reasoning;
  return script;
}

// ---- Reasoning ----

TEST_CASE("reasoning: a <think> block at the start is reasoning, the rest content", "[unit][typed_output]") {
  CheckScript(Reasoned("<think>a</think>b", "a", "b"));
  // Whitespace before the block is dropped; newlines right after the end marker are not content.
  CheckScript(Reasoned("\n <think>\nplan: x < y\n</think>\n\nThe answer is 4.", "\nplan: x < y\n", "The answer is 4."));
  CheckScript(Reasoned("<think></think>\r\n\r\n  indented", "", "  indented"));
  CheckScript(Reasoned("<think>only</think>\n\n", "only", ""));
  // A second block later is content.
  CheckScript(Reasoned("<think>a</think>b<think>c</think>", "a", "b<think>c</think>"));
}

TEST_CASE("reasoning: opened by the prompt, the text is reasoning up to the end marker", "[unit][typed_output]") {
  CheckScript(Reasoned("Let me think: 2+2=4.</think>\n\n4", "Let me think: 2+2=4.", "4", true));
  // A model that writes the start marker again: it is dropped, not reasoning text.
  CheckScript(Reasoned("\n<think>\nhmm</think>4", "\nhmm", "4", true));
  // ... but only at the very start.
  CheckScript(Reasoned("a <think> b</think>c", "a <think> b", "c", true));
}

TEST_CASE("reasoning: cut short inside the block, what was generated stays reasoning", "[unit][typed_output]") {
  CheckScript(Reasoned("<think>partial thou", "partial thou", ""));
  CheckScript(Reasoned("<think>abc</thi", "abc</thi", ""));
  CheckScript(Reasoned("started in it </th", "started in it </th", "", true));
  CheckScript(Reasoned("<think>", "", ""));
}

TEST_CASE("reasoning: text that does not open with the start marker is content", "[unit][typed_output]") {
  // An end marker the prompt did not open is not guessed at.
  CheckScript(Reasoned("answer</think>more", "", "answer</think>more"));
  CheckScript(Reasoned("Hi <think>x</think>", "", "Hi <think>x</think>"));
  CheckScript(Reasoned("  <thinking>", "", "  <thinking>"));
  CheckScript(Reasoned("<thi", "", "<thi"));
  CheckScript(Reasoned("\n\n", "", "\n\n"));
  CheckScript(Reasoned("", "", ""));
}

TEST_CASE("reasoning: a long run of leading whitespace is not held for ever", "[unit][typed_output]") {
  const std::string spaces(5000, ' ');
  CheckScript(Reasoned(spaces + "<think>a</think>b", "", spaces + "<think>a</think>b"));
  std::unique_ptr<ChoiceOutputParser> parser = MakeParser(Reasoned("", "", ""));
  CHECK(parser->Add(spaces).content == spaces);
}

TEST_CASE("reasoning: without markers everything is content", "[unit][typed_output]") {
  Script script = Make(ToolCallFormat::kNone, "<think>a</think>\n\nb", "<think>a</think>\n\nb");
  CheckScript(script);
  script.starts_in_reasoning = true;  // nothing to end it: still content
  CheckScript(script);
}

TEST_CASE("reasoning: content is held back only while it may be a marker", "[unit][typed_output]") {
  Script script = Reasoned("", "", "");
  std::unique_ptr<ChoiceOutputParser> parser = MakeParser(script);
  TypedDelta delta = parser->Add("  <thi");
  CHECK(delta.empty());
  delta = parser->Add("nk>step one</");
  CHECK(delta.reasoning == "step one");
  delta = parser->Add("think>\n");
  CHECK(delta.empty());
  delta = parser->Add("\nAnswer");
  CHECK(delta.content == "Answer");
  CHECK(delta.reasoning.empty());
  delta = parser->Add(" more </think>");
  CHECK(delta.content == " more </think>");
  CHECK(parser->Finish().empty());

  std::unique_ptr<ChoiceOutputParser> plain = MakeParser(script);
  CHECK(plain->Add("Hello").content == "Hello");  // decided at the first byte that cannot open the block
}

TEST_CASE("reasoning: tool calls are read in the content only", "[unit][typed_output]") {
  Script script = Make(ToolCallFormat::kHermes,
                       "<think>I should call f.</think>\n\n<tool_call>\n{\"name\": \"f\", \"arguments\": {\"x\": "
                       "1}}\n</tool_call>",
                       "", {{"f", R"({"x":1})"}});
  script.markers = Think();
  script.reasoning = "I should call f.";
  CheckScript(script);

  script.text = "<think>maybe <tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call></think>ok";
  script.reasoning = "maybe <tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>";
  script.content = "ok";
  script.calls.clear();
  CheckScript(script);

  script.text = "plan</think><tool_call>{\"name\": \"g\", \"arguments\": {}}</tool_call>";
  script.starts_in_reasoning = true;
  script.reasoning = "plan";
  script.content = "";
  script.calls = {{"g", "{}"}};
  CheckScript(script);
}

// ---- none ----

TEST_CASE("none: all text is content, markers and all", "[unit][typed_output]") {
  CheckScript(Make(ToolCallFormat::kNone, "a <tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call> b",
                   "a <tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call> b"));
  std::unique_ptr<ToolCallParser> parser = MakeToolCallParser(ToolCallFormat::kNone, {});
  TypedDelta out;
  parser->Add("[TOOL_CALLS]", out);
  CHECK(out.content == "[TOOL_CALLS]");
  parser->Finish(out);
  CHECK(out.content == "[TOOL_CALLS]");
  CHECK(parser->num_calls() == 0);
}

// ---- hermes ----

TEST_CASE("hermes: calls between <tool_call> tags, text around them content", "[unit][typed_output]") {
  CheckScript(Make(ToolCallFormat::kHermes,
                   "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", "
                   "\"unit\": \"c\"}}\n</tool_call>",
                   "Let me check.\n", {{"get_weather", R"({"city":"Paris","unit":"c"})"}}));
  // Several calls in a row: the whitespace between and after them is not content.
  CheckScript(Make(ToolCallFormat::kHermes,
                   "<tool_call>{\"name\":\"a\",\"arguments\":{\"n\":[1,2,{\"k\":null}]}}</tool_call>\n"
                   "<tool_call>\n{\"name\": \"b\", \"arguments\": {}}\n</tool_call>\n",
                   "", {{"a", R"({"n":[1,2,{"k":null}]})"}, {"b", "{}"}}));
  // Text after and between calls is content.
  CheckScript(Make(ToolCallFormat::kHermes,
                   "<tool_call>{\"name\": \"a\", \"arguments\": {}}</tool_call>\nand then <tool_call>{\"name\": "
                   "\"b\", \"arguments\": {\"s\": \"</tool\"}}</tool_call>\nDone.",
                   "\nand then \nDone.", {{"a", "{}"}, {"b", R"({"s":"</tool"})"}}));
  // Arguments quoted as a string, or absent; non-ASCII text.
  CheckScript(Make(ToolCallFormat::kHermes,
                   "Größe → <tool_call>{\"name\": \"f\", \"arguments\": \"{\\\"ü\\\": \\\"→\\\"}\"}</tool_call>"
                   "<tool_call>{\"name\": \"g\"}</tool_call>",
                   "Größe → ", {{"f", R"({"ü":"→"})"}, {"g", "{}"}}));
}

TEST_CASE("hermes: malformed or unfinished calls come back as content exactly", "[unit][typed_output]") {
  const std::string bad_json = "<tool_call>\n{\"name\": \"f\", \"arguments\": {bad}}\n</tool_call>";
  CheckScript(Make(ToolCallFormat::kHermes, "x " + bad_json + " tail", "x " + bad_json + " tail"));
  const std::string no_name = "<tool_call>{\"arguments\": {}}</tool_call>";
  CheckScript(Make(ToolCallFormat::kHermes, no_name, no_name));
  const std::string array_arguments = "<tool_call>{\"name\": \"f\", \"arguments\": [1]}</tool_call>";
  CheckScript(Make(ToolCallFormat::kHermes, array_arguments, array_arguments));
  // A malformed call between good ones: the good ones are calls, the bad one content.
  CheckScript(Make(ToolCallFormat::kHermes,
                   "<tool_call>{\"name\": \"a\", \"arguments\": {}}</tool_call>" + no_name +
                       "<tool_call>{\"name\": \"b\", \"arguments\": {}}</tool_call>",
                   no_name, {{"a", "{}"}, {"b", "{}"}}));
  // JSON's parser would stop at the NUL byte and take the call before it; a raw NUL is never JSON.
  const std::string with_nul = std::string("<tool_call>{\"name\": \"f\", \"arguments\": {}}\0 x</tool_call>", 56);
  CheckScript(Make(ToolCallFormat::kHermes, with_nul, with_nul));
  // Unterminated at the end.
  const std::string unfinished = "Sure <tool_call>\n{\"name\": \"f\", \"arguments\": {}}";
  CheckScript(Make(ToolCallFormat::kHermes, unfinished, unfinished));
  CheckScript(Make(ToolCallFormat::kHermes, "a <tool_call", "a <tool_call"));
  // Things that look like the marker but are not.
  CheckScript(Make(ToolCallFormat::kHermes, "if a < b and <tool_ x <<tool_call", "if a < b and <tool_ x <<tool_call"));
}

TEST_CASE("hermes: content passes at once, a partial marker is held", "[unit][typed_output]") {
  Script script = Make(ToolCallFormat::kHermes, "", "");
  std::unique_ptr<ChoiceOutputParser> parser = MakeParser(script);
  CHECK(parser->Add("Hello wor").content == "Hello wor");
  CHECK(parser->Add("ld <tool").content == "ld ");
  TypedDelta delta = parser->Add("_call>{\"name\": \"f\", \"arguments\": {\"a\": 1}}</tool_c");
  CHECK(delta.empty());
  delta = parser->Add("all>");
  REQUIRE(delta.tool_calls.size() == 1);
  CHECK(delta.tool_calls[0].index == 0);
  CHECK(delta.tool_calls[0].name == "f");
  CHECK(delta.tool_calls[0].arguments == R"({"a":1})");
  CHECK(delta.content.empty());
  CHECK(parser->made_tool_calls());
  CHECK(parser->Finish().empty());
}

TEST_CASE("hermes: several calls in one delta are all reported in it", "[unit][typed_output]") {
  Script script = Make(ToolCallFormat::kHermes, "", "");
  std::unique_ptr<ChoiceOutputParser> parser = MakeParser(script);
  const TypedDelta delta = parser->Add(
      "Two: <tool_call>{\"name\": \"a\", \"arguments\": {\"x\": 1}}</tool_call><tool_call>{\"name\": \"b\", "
      "\"arguments\": {\"y\": [true]}}</tool_call><tool_call>{\"name\": \"c\", \"arguments\": {}}</tool_call>");
  CHECK(delta.content == "Two: ");
  REQUIRE(delta.tool_calls.size() == 3);
  for (uint32_t i = 0; i < 3; ++i) CHECK(delta.tool_calls[i].index == i);
  CHECK(delta.tool_calls[0].arguments == R"({"x":1})");
  CHECK(delta.tool_calls[1].arguments == R"({"y":[true]})");
  CHECK(delta.tool_calls[2].name == "c");
}

TEST_CASE("hermes: arguments keep the model's key order, compact", "[unit][typed_output]") {
  const Parsed parsed = Feed(Make(ToolCallFormat::kHermes,
                                  "<tool_call>{\"name\": \"f\", \"arguments\": {\"z\": 1, \"a\": {\"y\": 2, \"b\": "
                                  "3}, \"m\": \"s\"}}</tool_call>",
                                  ""),
                             {});
  REQUIRE(parsed.calls.size() == 1);
  CHECK(parsed.calls[0].arguments == R"({"z":1,"a":{"y":2,"b":3},"m":"s"})");
}

TEST_CASE("hermes: a call larger than 1 MiB is given up as content", "[unit][typed_output]") {
  Script script = Make(ToolCallFormat::kHermes, "", "");
  std::unique_ptr<ChoiceOutputParser> parser = MakeParser(script);
  std::string fed = "<tool_call>{\"name\": \"f\", \"arguments\": {\"s\": \"";
  Parsed parsed;
  testing::Collect(parser->Add(fed), parsed);
  const std::string chunk(64 * 1024, 'x');
  for (int i = 0; i < 20; ++i) {
    testing::Collect(parser->Add(chunk), parsed);
    fed += chunk;
  }
  CHECK(parsed.content.size() > (1u << 20));  // released before the end, memory stays bounded
  const std::string tail = "\"}}</tool_call> and <tool_call>{\"name\": \"g\", \"arguments\": {}}</tool_call>";
  testing::Collect(parser->Add(tail), parsed);
  testing::Collect(parser->Finish(), parsed);
  CHECK(parsed.content == fed + "\"}}</tool_call> and ");
  REQUIRE(parsed.calls.size() == 1);  // later calls are still read
  CHECK(parsed.calls[0].name == "g");
}

// ---- qwen3_coder ----

constexpr char kWeatherTools[] = R"([{"type": "function", "function": {"name": "get_weather", "parameters": {
  "type": "object", "properties": {
    "city": {"type": "string"}, "days": {"type": "integer"}, "verbose": {"type": "boolean"},
    "filters": {"type": "object"}, "tags": {"type": "array"}, "ratio": {"type": ["number", "string"]},
    "note": {"description": "no type"}}}}}])";

TEST_CASE("qwen3_coder: parameters typed by the tool's schema, in order", "[unit][typed_output]") {
  Script script =
      Make(ToolCallFormat::kQwen3CoderXml,
           "I'll check.\n<tool_call>\n<function=get_weather>\n<parameter=city>\nNew York\n</parameter>\n"
           "<parameter=days>\n3\n</parameter>\n<parameter=verbose>\ntrue\n</parameter>\n<parameter=filters>\n"
           "{\"a\": [1, 2]}\n</parameter>\n<parameter=tags>\nnot json\n</parameter>\n<parameter=ratio>\n0.5\n"
           "</parameter>\n<parameter=note>\n42\n</parameter>\n</function>\n</tool_call>",
           "I'll check.\n",
           {{"get_weather",
             R"({"city":"New York","days":3,"verbose":true,"filters":{"a":[1,2]},"tags":"not json","ratio":0.5,
                 "note":"42"})"}});
  script.tools_json = kWeatherTools;
  CheckScript(script);
  const Parsed parsed = Feed(script, {});
  REQUIRE(parsed.calls.size() == 1);
  CHECK(parsed.calls[0].arguments ==
        R"({"city":"New York","days":3,"verbose":true,"filters":{"a":[1,2]},"tags":"not json","ratio":0.5,)"
        R"("note":"42"})");
}

TEST_CASE("qwen3_coder: values lose one newline each side, strings stay strings", "[unit][typed_output]") {
  Script script = Make(ToolCallFormat::kQwen3CoderXml,
                       "<tool_call>\n<function=get_weather>\n<parameter=city>\n123\n</parameter>\n<parameter=ratio>\n"
                       "n/a\n</parameter>\n<parameter=days>\nmany\n</parameter>\n</function>\n</tool_call>\n"
                       "<tool_call>\n<function=write_file>\n<parameter=content>\n\n  indented\nline2\n\n"
                       "</parameter>\n<parameter=count>\n7\n</parameter>\n</function>\n</tool_call>",
                       "",
                       {{"get_weather", R"({"city":"123","ratio":"n/a","days":"many"})"},
                        {"write_file", R"({"content":"\n  indented\nline2\n","count":"7"})"}});
  script.tools_json = kWeatherTools;  // write_file is unknown: its values are strings
  CheckScript(script);
}

TEST_CASE("qwen3_coder: no parameters, several functions, text around", "[unit][typed_output]") {
  CheckScript(Make(ToolCallFormat::kQwen3CoderXml,
                   "a<tool_call><function=now></function></tool_call>b<tool_call>\n<function=x>\n</function>\n"
                   "<function=y>\n<parameter=p>\nv\n</parameter>\n</function>\n</tool_call>",
                   "ab", {{"now", "{}"}, {"x", "{}"}, {"y", R"({"p":"v"})"}}));
}

TEST_CASE("qwen3_coder: malformed or unfinished calls come back as content", "[unit][typed_output]") {
  const std::string no_function_end = "<tool_call>\n<function=f>\n<parameter=p>\nv\n</parameter>\n</tool_call>";
  CheckScript(Make(ToolCallFormat::kQwen3CoderXml, no_function_end + " after", no_function_end + " after"));
  const std::string no_parameter_end = "<tool_call>\n<function=f>\n<parameter=p>\nv\n</function>\n</tool_call>";
  CheckScript(Make(ToolCallFormat::kQwen3CoderXml, no_parameter_end, no_parameter_end));
  const std::string json_inside = "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>";
  CheckScript(Make(ToolCallFormat::kQwen3CoderXml, json_inside, json_inside));
  const std::string unfinished = "ok <tool_call>\n<function=f>\n<parameter=p>\nv\n</parameter>\n</function>\n";
  CheckScript(Make(ToolCallFormat::kQwen3CoderXml, unfinished, unfinished));
}

// ---- ids ----

TEST_CASE("call ids: random from the seed, unique within a choice", "[unit][typed_output]") {
  std::string text;
  for (int i = 0; i < 50; ++i) text += "<tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>";
  const Script script = Make(ToolCallFormat::kHermes, text, "");
  auto ids = [&](uint64_t seed) {
    std::unique_ptr<ChoiceOutputParser> parser = MakeParser(script, seed);
    TypedDelta delta = parser->Add(script.text);
    delta.Append(parser->Finish());
    std::vector<std::string> out;
    for (const ToolCallPart& part : delta.tool_calls) out.push_back(part.id);
    return out;
  };
  const std::vector<std::string> first = ids(1);
  REQUIRE(first.size() == 50);
  CHECK(std::set<std::string>(first.begin(), first.end()).size() == 50);
  CHECK(ids(1) == first);
  CHECK(ids(2) != first);
  CHECK(ids(2)[0] != first[0]);
}

}  // namespace
}  // namespace llmc::typed_output
