// Tool-call grammars: each format's calls as a model writes them are accepted whole, wrong ones refused;
// text that avoids a marker; AUTO, REQUIRED, NAMED, parallel and reasoning; refusals; random walks whose
// completed texts must hold well-formed calls.
#include "worker/typed_output/tool_call_grammar.h"

#include <bitset>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "tests/support/catch.h"
#include "worker/grammar/automaton.h"
#include "worker/grammar/matcher.h"
#include "worker/typed_output/constraint_grammar.h"

namespace llmc::typed_output {
namespace {

using grammar::CompiledGrammar;
using grammar::GrammarMatcher;
using Json = nlohmann::ordered_json;

// get_weather: required string and enum, optional bounded integer. create_event: nested object, array.
// get_time: no parameters.
const char* const kTools = R"([
  {"type": "function", "function": {"name": "get_weather", "description": "Weather in a city",
    "parameters": {"type": "object", "properties": {
      "city": {"type": "string", "description": "the city"},
      "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
      "days": {"type": "integer", "minimum": 1, "maximum": 14}},
     "required": ["city", "unit"]}}},
  {"type": "function", "function": {"name": "create_event",
    "parameters": {"type": "object", "properties": {
      "title": {"type": "string"},
      "when": {"type": "object", "properties": {"date": {"type": "string", "format": "date"},
                                                 "hour": {"type": "integer"}}, "required": ["date"]},
      "attendees": {"type": "array", "items": {"type": "string"}}},
     "required": ["title", "when"]}}},
  {"type": "function", "function": {"name": "get_time"}}
])";

v1::ToolCallConstraint Constraint(const std::string& format, v1::ToolChoice choice, bool parallel = true,
                                  const std::string& tools = kTools) {
  v1::ToolCallConstraint constraint;
  constraint.set_format(format);
  constraint.set_tools_json(tools);
  constraint.set_choice(choice);
  constraint.set_parallel(parallel);
  return constraint;
}

std::shared_ptr<const CompiledGrammar> Compile(const v1::ToolCallConstraint& constraint) {
  absl::StatusOr<grammar::Grammar> built = BuildToolCallGrammar(constraint, {});
  INFO(built.status().ToString());
  REQUIRE(built.ok());
  absl::StatusOr<std::shared_ptr<const CompiledGrammar>> compiled = grammar::CompileGrammar(*built);
  INFO(compiled.status().ToString());
  REQUIRE(compiled.ok());
  return *compiled;
}

bool Accepts(const std::shared_ptr<const CompiledGrammar>& compiled, const std::string& text) {
  GrammarMatcher matcher(compiled, nullptr);
  return matcher.AcceptBytes(text) && matcher.CanEnd();
}

std::string Error(const v1::ToolCallConstraint& constraint) {
  absl::StatusOr<grammar::Grammar> built = BuildToolCallGrammar(constraint, {});
  REQUIRE_FALSE(built.ok());
  CHECK(built.status().code() == absl::StatusCode::kInvalidArgument);
  return std::string(built.status().message());
}

// One format's texts: calls of get_weather (Paris in celsius; with days), get_time, and the two in a row;
// and wrong ones.
struct FormatCase {
  std::string format;
  std::string weather, weather_days, time, weather_then_time;
  std::string wrong_name, missing_required, wrong_type, bad_enum;
  std::string marker;  // AUTO: what opens the calls inside free text (empty: calls only at the start)
};

std::vector<FormatCase> Cases() {
  const std::string ds_begin = "<｜tool▁calls▁begin｜>", ds_end = "<｜tool▁calls▁end｜>";
  const std::string ds_call = "<｜tool▁call▁begin｜>", ds_call_end = "<｜tool▁call▁end｜>", ds_sep = "<｜tool▁sep｜>";
  const auto hermes = [](const std::string& name, const std::string& args) {
    return absl::StrCat("<tool_call>\n{\"name\": \"", name, "\", \"arguments\": ", args, "}\n</tool_call>");
  };
  const auto xml = [](const std::string& name, const std::string& params) {
    return absl::StrCat("<tool_call>\n<function=", name, ">\n", params, "</function>\n</tool_call>");
  };
  const auto xml_param = [](const std::string& name, const std::string& value) {
    return absl::StrCat("<parameter=", name, ">\n", value, "\n</parameter>\n");
  };
  const auto llama = [](const std::string& name, const std::string& args) {
    return absl::StrCat("{\"name\": \"", name, "\", \"parameters\": ", args, "}");
  };
  const auto mistral = [](const std::string& name, const std::string& args) {
    return absl::StrCat("{\"name\": \"", name, "\", \"arguments\": ", args, "}");
  };
  const auto v3 = [&](const std::string& name, const std::string& args) {
    return absl::StrCat(ds_call, "function", ds_sep, name, "\n```json\n", args, "\n```", ds_call_end);
  };
  const auto v31 = [&](const std::string& name, const std::string& args) {
    return absl::StrCat(ds_call, name, ds_sep, args, ds_call_end);
  };
  const std::string paris = R"({"city":"Paris","unit":"celsius"})";
  const std::string paris_days = R"({"city":"Paris","unit":"celsius","days":3})";
  const std::string missing = R"({"unit":"celsius"})";
  const std::string wrong_type = R"({"city":"Paris","unit":"celsius","days":"3"})";
  const std::string bad_enum = R"({"city":"Paris","unit":"kelvin"})";
  std::vector<FormatCase> cases;
  cases.push_back({"hermes", hermes("get_weather", paris), hermes("get_weather", paris_days), hermes("get_time", "{}"),
                   hermes("get_weather", paris) + "\n" + hermes("get_time", "{}"), hermes("get_wether", paris),
                   hermes("get_weather", missing), hermes("get_weather", wrong_type), hermes("get_weather", bad_enum),
                   "<tool_call>"});
  const std::string city = xml_param("city", "Paris"), unit = xml_param("unit", "celsius");
  cases.push_back({"qwen3_coder", xml("get_weather", city + unit),
                   xml("get_weather", city + unit + xml_param("days", "3")), xml("get_time", ""),
                   xml("get_weather", city + unit) + "\n" + xml("get_time", ""), xml("get_wether", city + unit),
                   xml("get_weather", unit), xml("get_weather", city + unit + xml_param("days", "three")),
                   xml("get_weather", city + xml_param("unit", "kelvin")), "<tool_call>"});
  cases.push_back({"llama3_json", llama("get_weather", paris), llama("get_weather", paris_days),
                   llama("get_time", "{}"), llama("get_weather", paris) + "; " + llama("get_time", "{}"),
                   llama("get_wether", paris), llama("get_weather", missing), llama("get_weather", wrong_type),
                   llama("get_weather", bad_enum), ""});
  cases.push_back({"pythonic", R"([get_weather(city="Paris", unit="celsius")])",
                   R"([get_weather(city="Paris", unit="celsius", days=3)])", "[get_time()]",
                   R"([get_weather(city="Paris", unit="celsius"), get_time()])",
                   R"([get_wether(city="Paris", unit="celsius")])", R"([get_weather(unit="celsius")])",
                   R"([get_weather(city="Paris", unit="celsius", days="3")])",
                   R"([get_weather(city="Paris", unit="kelvin")])", ""});
  cases.push_back(
      {"mistral", "[TOOL_CALLS][" + mistral("get_weather", paris) + "]",
       "[TOOL_CALLS] [" + mistral("get_weather", paris_days) + "]", "[TOOL_CALLS][" + mistral("get_time", "{}") + "]",
       "[TOOL_CALLS][" + mistral("get_weather", paris) + ", " + mistral("get_time", "{}") + "]",
       "[TOOL_CALLS][" + mistral("get_wether", paris) + "]", "[TOOL_CALLS][" + mistral("get_weather", missing) + "]",
       "[TOOL_CALLS][" + mistral("get_weather", wrong_type) + "]",
       "[TOOL_CALLS][" + mistral("get_weather", bad_enum) + "]", "[TOOL_CALLS]"});
  cases.push_back({"deepseek_v3", ds_begin + v3("get_weather", paris) + ds_end,
                   ds_begin + v3("get_weather", paris_days) + ds_end, ds_begin + v3("get_time", "{}") + ds_end,
                   ds_begin + v3("get_weather", paris) + "\n" + v3("get_time", "{}") + ds_end,
                   ds_begin + v3("get_wether", paris) + ds_end, ds_begin + v3("get_weather", missing) + ds_end,
                   ds_begin + v3("get_weather", wrong_type) + ds_end, ds_begin + v3("get_weather", bad_enum) + ds_end,
                   ds_begin});
  cases.push_back({"deepseek_v31", ds_begin + v31("get_weather", paris) + ds_end,
                   ds_begin + v31("get_weather", paris_days) + ds_end, ds_begin + v31("get_time", "{}") + ds_end,
                   ds_begin + v31("get_weather", paris) + v31("get_time", "{}") + ds_end,
                   ds_begin + v31("get_wether", paris) + ds_end, ds_begin + v31("get_weather", missing) + ds_end,
                   ds_begin + v31("get_weather", wrong_type) + ds_end, ds_begin + v31("get_weather", bad_enum) + ds_end,
                   ds_begin});
  return cases;
}

// The tools with get_weather strict (AUTO constrains only strict tools).
std::string StrictWeatherTools() {
  Json tools = Json::parse(kTools);
  tools[0]["function"]["strict"] = true;
  return tools.dump();
}

TEST_CASE("tool-call grammar: REQUIRED accepts each format's calls and refuses wrong ones", "[unit]") {
  for (const FormatCase& c : Cases()) {
    INFO("format " << c.format);
    const auto parallel = Compile(Constraint(c.format, v1::TOOL_CHOICE_REQUIRED, true));
    CHECK(Accepts(parallel, c.weather));
    CHECK(Accepts(parallel, c.weather_days));
    CHECK(Accepts(parallel, c.time));
    CHECK(Accepts(parallel, c.weather_then_time));
    CHECK_FALSE(Accepts(parallel, c.wrong_name));
    CHECK_FALSE(Accepts(parallel, c.missing_required));
    CHECK_FALSE(Accepts(parallel, c.wrong_type));
    CHECK_FALSE(Accepts(parallel, c.bad_enum));
    CHECK_FALSE(Accepts(parallel, "Sure, let me check. " + c.weather));
    CHECK_FALSE(Accepts(parallel, ""));
    CHECK_FALSE(Accepts(parallel, "The weather is fine."));

    const auto single = Compile(Constraint(c.format, v1::TOOL_CHOICE_REQUIRED, false));
    CHECK(Accepts(single, c.weather));
    CHECK(Accepts(single, c.time));
    CHECK_FALSE(Accepts(single, c.weather_then_time));
  }
}

TEST_CASE("tool-call grammar: NAMED allows exactly one call of that tool", "[unit]") {
  for (const FormatCase& c : Cases()) {
    INFO("format " << c.format);
    v1::ToolCallConstraint constraint = Constraint(c.format, v1::TOOL_CHOICE_NAMED, true);
    constraint.set_name("get_weather");
    const auto named = Compile(constraint);
    CHECK(Accepts(named, c.weather));
    CHECK(Accepts(named, c.weather_days));
    CHECK_FALSE(Accepts(named, c.time));
    CHECK_FALSE(Accepts(named, c.weather_then_time));
    CHECK_FALSE(Accepts(named, c.missing_required));
    CHECK_FALSE(Accepts(named, c.wrong_type));
  }
}

TEST_CASE("tool-call grammar: AUTO allows free text, then calls whose strict tools follow their schema", "[unit]") {
  for (const FormatCase& c : Cases()) {
    INFO("format " << c.format);
    const auto automatic = Compile(Constraint(c.format, v1::TOOL_CHOICE_AUTO, true, StrictWeatherTools()));
    CHECK(Accepts(automatic, ""));
    CHECK(Accepts(automatic, "The weather in Paris is mild; take a coat. {\"a\": [1]}"));
    CHECK(Accepts(automatic, "Unicode too: 東京は晴れ ｜ <tool ▁ [TOOL \xF0\x9F\x98\x80"));
    CHECK(Accepts(automatic, c.weather));
    CHECK(Accepts(automatic, c.weather_then_time));
    CHECK_FALSE(Accepts(automatic, c.wrong_name));
    // get_weather is strict: its schema holds. create_event is not: any JSON object (or any parameters).
    CHECK_FALSE(Accepts(automatic, c.missing_required));
    CHECK_FALSE(Accepts(automatic, c.bad_enum));
    if (!c.marker.empty()) {
      CHECK(Accepts(automatic, "Let me look that up.\n\n" + c.weather));
      CHECK_FALSE(Accepts(automatic, "Let me look that up.\n\n" + c.marker + " get_weather Paris"));
      CHECK_FALSE(Accepts(automatic, c.weather + " and some more text"));
    } else {
      // The calls are the whole answer (after a little whitespace); text that does not begin like them is
      // content to the end, as the format's parser reads it.
      CHECK(Accepts(automatic, "\n " + c.weather));
      CHECK(Accepts(automatic, "Let me look that up. " + c.missing_required));
      CHECK_FALSE(Accepts(automatic, c.format == "pythonic" ? "[1] says so" : "{\"answer\": 4}"));
      CHECK_FALSE(Accepts(automatic, c.format == "pythonic" ? " \n[1] says so" : "\n{\"answer\": 4}"));
    }
  }
  // Non-strict tools in AUTO: arguments are free (any object / any parameter values), names are not.
  const auto hermes = Compile(Constraint("hermes", v1::TOOL_CHOICE_AUTO, true));
  CHECK(Accepts(hermes, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"town\":1}}\n</tool_call>\n"));
  CHECK_FALSE(Accepts(hermes, "<tool_call>\n{\"name\": \"get_wether\", \"arguments\": {}}\n</tool_call>"));
  const auto xml = Compile(Constraint("qwen3_coder", v1::TOOL_CHOICE_AUTO, true));
  CHECK(Accepts(xml,
                "Checking.\n<tool_call>\n<function=get_weather>\n<parameter=town>\n{x}\n</parameter>\n"
                "</function>\n</tool_call>"));
  const auto pythonic = Compile(Constraint("pythonic", v1::TOOL_CHOICE_AUTO, true));
  CHECK(Accepts(pythonic, R"([create_event(any_name={"x":null}, other=2)])"));
  // parallel=false: at most one call after the text.
  const auto single = Compile(Constraint("hermes", v1::TOOL_CHOICE_AUTO, false));
  const FormatCase h = Cases().front();
  CHECK(Accepts(single, "ok " + h.weather));
  CHECK_FALSE(Accepts(single, "ok " + h.weather_then_time));
}

TEST_CASE("tool-call grammar: formats' details (strictness, whitespace, raw XML values, pythonic keywords)", "[unit]") {
  // Non-strict REQUIRED: members beyond the properties are allowed (JSON Schema's default), not when strict.
  const std::string extra =
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\":\"Paris\",\"unit\":\"celsius\",\"x\":1}}\n"
      "</tool_call>";
  CHECK(Accepts(Compile(Constraint("hermes", v1::TOOL_CHOICE_REQUIRED)), extra));
  CHECK_FALSE(Accepts(Compile(Constraint("hermes", v1::TOOL_CHOICE_REQUIRED, true, StrictWeatherTools())), extra));
  // hermes: a little whitespace may end the answer, not a lot.
  const auto hermes = Compile(Constraint("hermes", v1::TOOL_CHOICE_REQUIRED));
  const std::string call = Cases()[0].weather;
  CHECK(Accepts(hermes, call + "\n"));
  CHECK_FALSE(Accepts(hermes, call + "\n\n\n\n\n\n"));
  CHECK_FALSE(Accepts(hermes, call + "\n\n" + call));

  const auto xml = Compile(Constraint("qwen3_coder", v1::TOOL_CHOICE_REQUIRED));
  const auto weather = [](const std::string& city) {
    return absl::StrCat("<tool_call>\n<function=get_weather>\n<parameter=city>\n", city,
                        "\n</parameter>\n<parameter=unit>\ncelsius\n</parameter>\n</function>\n</tool_call>");
  };
  CHECK(Accepts(xml, weather("New York\nor \"Boston\" </param </parameter")));
  CHECK(Accepts(xml, weather("")));
  CHECK_FALSE(Accepts(xml, weather("a </parameter> b")));
  // Parameters come in the order of `properties`.
  CHECK_FALSE(Accepts(xml,
                      "<tool_call>\n<function=get_weather>\n<parameter=unit>\ncelsius\n</parameter>\n"
                      "<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>"));
  // Non-string values are JSON per their schema (a nested object, an array).
  CHECK(Accepts(xml,
                "<tool_call>\n<function=create_event>\n<parameter=title>\nLunch\n</parameter>\n"
                "<parameter=when>\n{\"date\":\"2025-03-01\",\"hour\":12}\n</parameter>\n"
                "<parameter=attendees>\n[\"Ann\",\"Bo\"]\n</parameter>\n</function>\n</tool_call>"));
  CHECK_FALSE(Accepts(xml,
                      "<tool_call>\n<function=create_event>\n<parameter=title>\nLunch\n</parameter>\n"
                      "<parameter=when>\n{\"date\":\"2025-02-30\"}\n</parameter>\n</function>\n</tool_call>"));

  const auto pythonic = Compile(Constraint("pythonic", v1::TOOL_CHOICE_REQUIRED));
  CHECK(Accepts(pythonic, R"([create_event(title="Lunch", when={"date":"2025-03-01"}, attendees=["Ann"])])"));
  CHECK(Accepts(pythonic, R"([create_event(title="Lunch", when={"date":"2025-03-01"})])"));
  CHECK_FALSE(Accepts(pythonic, R"([create_event(title="Lunch", attendees=["Ann"])])"));
  CHECK_FALSE(Accepts(pythonic, R"([create_event(title="Lunch", when={"date":"2025-03-01"}, )])"));
  CHECK_FALSE(Accepts(pythonic, R"([get_weather(city="Paris",unit="celsius")])"));

  // Optional keywords in any combination, separators only between those written.
  const std::string optional_tools = R"([{"type": "function", "function": {"name": "f", "parameters": {
      "type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "boolean"}, "c": {"type": "null"},
      "d": {"type": "string"}}, "required": ["c"]}}}])";
  const auto keywords = Compile(Constraint("pythonic", v1::TOOL_CHOICE_REQUIRED, true, optional_tools));
  CHECK(Accepts(keywords, "[f(c=null)]"));
  CHECK(Accepts(keywords, "[f(a=1, c=null)]"));
  CHECK(Accepts(keywords, "[f(b=true, c=null, d=\"x\")]"));
  CHECK(Accepts(keywords, "[f(a=-2, b=false, c=null, d=\"\")]"));
  CHECK_FALSE(Accepts(keywords, "[f(a=1)]"));
  CHECK_FALSE(Accepts(keywords, "[f(, c=null)]"));
  CHECK_FALSE(Accepts(keywords, "[f(c=null, a=1)]"));

  // Strict tool without parameters: exactly {}; non-strict: any object.
  const std::string bare = R"([{"type": "function", "function": {"name": "ping", "strict": true}},
                               {"type": "function", "function": {"name": "pong"}}])";
  const auto json = Compile(Constraint("llama3_json", v1::TOOL_CHOICE_REQUIRED, true, bare));
  CHECK(Accepts(json, R"({"name": "ping", "parameters": {}})"));
  CHECK_FALSE(Accepts(json, R"({"name": "ping", "parameters": {"a":1}})"));
  CHECK(Accepts(json, R"({"name": "pong", "parameters": {"a":1}})"));
  CHECK_FALSE(Accepts(json, R"({"name": "pong", "parameters": [1]})"));
}

TEST_CASE("tool-call grammar: $defs references keep working in per-parameter formats", "[unit]") {
  const std::string tools = R"([{"type": "function", "function": {"name": "order", "parameters": {
      "type": "object", "$defs": {"Item": {"type": "object", "properties": {"sku": {"type": "string"},
        "qty": {"type": "integer", "minimum": 1}}, "required": ["sku", "qty"]}},
      "properties": {"items": {"type": "array", "items": {"$ref": "#/$defs/Item"}, "minItems": 1},
                     "note": {"$ref": "#/properties/items"}},
      "required": ["items"]}}}])";
  const auto xml = Compile(Constraint("qwen3_coder", v1::TOOL_CHOICE_REQUIRED, true, tools));
  CHECK(Accepts(xml,
                "<tool_call>\n<function=order>\n<parameter=items>\n[{\"sku\":\"A1\",\"qty\":2}]\n</parameter>\n"
                "</function>\n</tool_call>"));
  CHECK_FALSE(Accepts(xml,
                      "<tool_call>\n<function=order>\n<parameter=items>\n[{\"sku\":\"A1\",\"qty\":0}]\n"
                      "</parameter>\n</function>\n</tool_call>"));
  const auto pythonic = Compile(Constraint("pythonic", v1::TOOL_CHOICE_REQUIRED, true, tools));
  CHECK(Accepts(pythonic, R"([order(items=[{"sku":"A1","qty":2}], note=[{"sku":"B","qty":1}])])"));
  CHECK_FALSE(Accepts(pythonic, R"([order(items=[{"sku":"A1","qty":2}], note=[])])"));
}

grammar::Grammar TextWithoutGrammar(const std::string& marker) {
  grammar::Grammar host;
  host.root = host.AddRule("root");
  host.rules[host.root].body = TextWithout(host, marker);
  return host;
}

TEST_CASE("TextWithout: any text without the marker, near misses included", "[unit]") {
  const auto hermes = grammar::CompileGrammar(TextWithoutGrammar("<tool_call>"));
  REQUIRE(hermes.ok());
  for (const std::string text : {"", "abc", "<tool_cal", "<tool_call", "<<tool_call", "tool_call>", "<tool_cal>l",
                                 "<tool_<tool_call", "<tool_call<tool_call", "</tool_call>", "x\n<tool_calls"}) {
    INFO(text);
    CHECK(Accepts(*hermes, text));
  }
  for (const std::string text : {"<tool_call>", "x<tool_call>y", "<<tool_call>", "<tool_<tool_call>"}) {
    INFO(text);
    CHECK_FALSE(Accepts(*hermes, text));
  }

  const std::string begin = "<｜tool▁calls▁begin｜>";
  const auto deepseek = grammar::CompileGrammar(TextWithoutGrammar(begin));
  REQUIRE(deepseek.ok());
  CHECK(Accepts(*deepseek, "<｜tool▁calls▁begin"));
  CHECK(Accepts(*deepseek, "<｜tool▁call▁begin｜>"));
  CHECK(Accepts(*deepseek, "｜｜<｜tool▁calls<｜tool▁calls▁begin｝>"));  // ｝ shares ｜'s first two bytes
  CHECK(Accepts(*deepseek, "<｜tool▁calls▁begin｜"));
  CHECK_FALSE(Accepts(*deepseek, begin));
  CHECK_FALSE(Accepts(*deepseek, "abc<｜tool▁calls<" + begin + "def"));
  CHECK_FALSE(Accepts(*deepseek, "\xFF"));  // not UTF-8
}

// Every text over a small alphabet up to a length: accepted exactly when the marker is not in it.
void CheckExhaustively(const std::string& marker, const std::vector<std::string>& alphabet, size_t max_length) {
  const auto compiled = grammar::CompileGrammar(TextWithoutGrammar(marker));
  REQUIRE(compiled.ok());
  std::vector<std::string> texts = {""};
  size_t checked = 0;
  for (size_t length = 0; length <= max_length; ++length) {
    std::vector<std::string> longer;
    for (const std::string& text : texts) {
      INFO("marker " << marker << ", text " << text);
      REQUIRE(Accepts(*compiled, text) == (text.find(marker) == std::string::npos));
      ++checked;
      for (const std::string& letter : alphabet) longer.push_back(text + letter);
    }
    texts = std::move(longer);
  }
  CHECK(checked >= 63);
}

TEST_CASE("TextWithout: matches the marker's absence exactly on every short text", "[unit]") {
  CheckExhaustively("abab", {"a", "b", "c"}, 7);
  CheckExhaustively("aabaa", {"a", "b"}, 9);
  CheckExhaustively("｜▁｜a", {"a", "｜", "▁", "｝"}, 6);
  CheckExhaustively("x", {"x", "y"}, 5);
}

TEST_CASE("tool-call grammar: reasoning before the calls", "[unit]") {
  const FormatCase h = Cases().front();
  v1::ToolCallConstraint constraint = Constraint("hermes", v1::TOOL_CHOICE_REQUIRED);
  constraint.set_reasoning_start("<think>");
  constraint.set_reasoning_end("</think>");
  const auto optional = Compile(constraint);
  CHECK(Accepts(optional, h.weather));
  CHECK(Accepts(optional, "<think>\nThe user wants the weather <think> in Paris.\n</think>\n\n" + h.weather));
  CHECK(Accepts(optional, "<think></think>" + h.weather));
  CHECK_FALSE(Accepts(optional, "<think>a</think>b</think>\n" + h.weather));
  CHECK_FALSE(Accepts(optional, "<think>a</think>\n\nSure. " + h.weather));
  CHECK_FALSE(Accepts(optional, "<think>never closed " + h.weather));
  CHECK_FALSE(Accepts(optional, "<think>a</think>\n\n\n\n\n\n\n" + h.weather));

  constraint.set_starts_in_reasoning(true);
  const auto inside = Compile(constraint);
  CHECK(Accepts(inside, "The user wants the weather.\n</think>\n\n" + h.weather));
  CHECK(Accepts(inside, "</think>" + h.weather));
  CHECK_FALSE(Accepts(inside, h.weather));
  CHECK_FALSE(Accepts(inside, "<think>a</think>\n" + h.weather + "</think>"));

  v1::ToolCallConstraint automatic = Constraint("deepseek_v31", v1::TOOL_CHOICE_AUTO, true, StrictWeatherTools());
  automatic.set_reasoning_start("<think>");
  automatic.set_reasoning_end("</think>");
  const auto auto_reasoning = Compile(automatic);
  const FormatCase ds = Cases().back();
  CHECK(Accepts(auto_reasoning, "<think>hmm</think>\n\nIt is 4."));
  CHECK(Accepts(auto_reasoning, "<think>hmm</think>\n\n" + ds.weather));
  CHECK(Accepts(auto_reasoning, "No reasoning here. " + ds.weather));
  CHECK_FALSE(Accepts(auto_reasoning, "<think>hmm</think>\n\n" + ds.bad_enum));
}

TEST_CASE("tool-call grammar: AUTO with a content constraint", "[unit]") {
  v1::ToolCallConstraint constraint = Constraint("hermes", v1::TOOL_CHOICE_AUTO, true, StrictWeatherTools());
  constraint.mutable_content()->set_json_schema(
      R"({"type":"object","properties":{"answer":{"type":"string"}},"required":["answer"]})");
  constraint.mutable_content()->set_strict(true);
  const auto compiled = Compile(constraint);
  CHECK(Accepts(compiled, R"({"answer":"mild"})"));
  CHECK(Accepts(compiled, Cases().front().weather));
  CHECK_FALSE(Accepts(compiled, "It is mild."));
  CHECK_FALSE(Accepts(compiled, R"({"answer":"mild","x":1})"));
  CHECK_FALSE(Accepts(compiled, R"({"answer":"mild"})" + Cases().front().weather));

  // Through ConstraintGrammar, as the worker's constraint compiler calls it.
  v1::OutputConstraint outer;
  *outer.mutable_tool_calls() = constraint;
  absl::StatusOr<grammar::Grammar> through = ConstraintGrammar(outer, {});
  REQUIRE(through.ok());
  absl::StatusOr<bool> matches = grammar::MatchesText(*through, R"({"answer":"x"})");
  REQUIRE(matches.ok());
  CHECK(*matches);

  v1::ToolCallConstraint bad_content = constraint;
  bad_content.mutable_content()->set_regex("(");
  bad_content.mutable_content()->set_source("response_format");
  // The worker puts the request's field (the constraint's source) in front of this.
  CHECK_THAT(Error(bad_content), Catch::StartsWith("regex: missing )"));

  v1::ToolCallConstraint nested = constraint;
  *nested.mutable_content()->mutable_tool_calls() = Constraint("hermes", v1::TOOL_CHOICE_REQUIRED);
  CHECK_THAT(Error(nested), Catch::Contains("cannot itself be tool calls"));
}

TEST_CASE("tool-call grammar: refusals", "[unit]") {
  v1::ToolCallConstraint named = Constraint("hermes", v1::TOOL_CHOICE_NAMED);
  named.set_name("nope");
  CHECK(Error(named) == "tool_choice names 'nope', which is not among the tools");
  CHECK_THAT(Error(Constraint("none", v1::TOOL_CHOICE_REQUIRED)),
             Catch::Contains("this model has no tool-call format; set the worker's tool_call_parser"));
  CHECK_THAT(Error(Constraint("harmonica", v1::TOOL_CHOICE_REQUIRED)), Catch::Contains("unknown tool-call format"));
  CHECK_THAT(Error(Constraint("hermes", v1::TOOL_CHOICE_REQUIRED, true, "[]")), Catch::Contains("no function tools"));
  CHECK_THAT(Error(Constraint("hermes", v1::TOOL_CHOICE_REQUIRED, true, "{")), Catch::Contains("JSON array"));

  // A keyword that cannot be enforced: named with the tool's place in `tools` (other types count).
  const std::string unenforceable = R"([{"type": "web_search"},
      {"type": "function", "function": {"name": "f", "parameters": {"type": "object",
        "properties": {"x": {"type": "string", "not": {"const": "a"}}}}}}])";
  const std::string message = Error(Constraint("hermes", v1::TOOL_CHOICE_REQUIRED, true, unenforceable));
  CHECK_THAT(message, Catch::StartsWith("tools[1].function.parameters: "));
  CHECK_THAT(message, Catch::Contains("'not'"));
  CHECK_THAT(Error(Constraint("pythonic", v1::TOOL_CHOICE_REQUIRED, true, unenforceable)),
             Catch::StartsWith("tools[1].function.parameters: property 'x': ") && Catch::Contains("'not'"));
  // AUTO leaves a non-strict tool's arguments free, so its schema is not compiled.
  CHECK(BuildToolCallGrammar(Constraint("hermes", v1::TOOL_CHOICE_AUTO, true, unenforceable), {}).ok());

  // qwen3_coder writes strings raw: a pattern on them cannot be enforced.
  const std::string pattern = R"([{"type": "function", "function": {"name": "f", "parameters": {"type": "object",
        "properties": {"code": {"type": "string", "pattern": "^[A-Z]+$"}}}}}])";
  CHECK_THAT(Error(Constraint("qwen3_coder", v1::TOOL_CHOICE_REQUIRED, true, pattern)),
             Catch::StartsWith("tools[0].function.parameters: property 'code': ") && Catch::Contains("'pattern'"));
  CHECK(BuildToolCallGrammar(Constraint("hermes", v1::TOOL_CHOICE_REQUIRED, true, pattern), {}).ok());
  // Per-parameter formats cannot enforce keywords on the whole object.
  const std::string whole = R"([{"type": "function", "function": {"name": "f", "parameters": {"type": "object",
        "properties": {"a": {"type": "integer"}}, "minProperties": 1}}}])";
  CHECK_THAT(Error(Constraint("pythonic", v1::TOOL_CHOICE_REQUIRED, true, whole)), Catch::Contains("'minProperties'"));
  CHECK(BuildToolCallGrammar(Constraint("mistral", v1::TOOL_CHOICE_REQUIRED, true, whole), {}).ok());
  const std::string not_object =
      R"([{"type": "function", "function": {"name": "f", "parameters": {"type": "array"}}}])";
  CHECK_THAT(Error(Constraint("hermes", v1::TOOL_CHOICE_REQUIRED, true, not_object)),
             Catch::StartsWith("tools[0].function.parameters: "));
}

// Twenty tools with a few typed parameters each.
std::string TwentyTools() {
  Json tools = Json::array();
  for (int i = 0; i < 20; ++i) {
    Json parameters = {{"type", "object"},
                       {"properties",
                        {{"query", {{"type", "string"}}},
                         {"limit", {{"type", "integer"}, {"minimum", 1}, {"maximum", 100}}},
                         {"mode", {{"type", "string"}, {"enum", {"fast", "exact"}}}},
                         {"filters", {{"type", "object"}, {"properties", {{"tag", {{"type", "string"}}}}}}}}},
                       {"required", {"query", "mode"}}};
    tools.push_back(
        {{"type", "function"},
         {"function", {{"name", absl::StrCat("tool_", i)}, {"parameters", parameters}, {"strict", i % 2 == 0}}}});
  }
  return tools.dump();
}

TEST_CASE("tool-call grammar: twenty tools compile compactly in every format", "[unit]") {
  const std::string tools = TwentyTools();
  for (const char* format :
       {"hermes", "qwen3_coder", "llama3_json", "pythonic", "mistral", "deepseek_v3", "deepseek_v31"}) {
    for (const v1::ToolChoice choice : {v1::TOOL_CHOICE_REQUIRED, v1::TOOL_CHOICE_AUTO}) {
      INFO(format << " choice " << choice);
      const auto compiled = Compile(Constraint(format, choice, true, tools));
      CHECK(compiled->num_states() < 40000);
      UNSCOPED_INFO(format << " choice " << choice << ": " << compiled->num_states() << " states");
    }
  }
  const auto hermes = Compile(Constraint("hermes", v1::TOOL_CHOICE_REQUIRED, true, tools));
  CHECK(Accepts(hermes,
                "<tool_call>\n{\"name\": \"tool_17\", \"arguments\": {\"query\":\"q\",\"mode\":\"fast\"}}\n"
                "</tool_call>"));
  CHECK_FALSE(Accepts(hermes,
                      "<tool_call>\n{\"name\": \"tool_20\", \"arguments\": {\"query\":\"q\",\"mode\":\"fast\"}}"
                      "\n</tool_call>"));
  const auto xml = Compile(Constraint("qwen3_coder", v1::TOOL_CHOICE_REQUIRED, true, tools));
  CHECK(Accepts(xml,
                "<tool_call>\n<function=tool_3>\n<parameter=query>\nq\n</parameter>\n<parameter=limit>\n7\n"
                "</parameter>\n<parameter=mode>\nexact\n</parameter>\n</function>\n</tool_call>"));
}

// A random walk over the matcher's allowed bytes, mostly printable ASCII. Past `budget` bytes it prefers bytes
// that close strings and objects and that continue a closing marker the text has begun (so that walks through
// free text and reasoning end). Returns false when it ran past `cap` (discarded).
bool Walk(const std::shared_ptr<const CompiledGrammar>& compiled, std::mt19937& random, size_t budget, size_t cap,
          std::string* text) {
  static const std::vector<std::string> kFinishers = {"</think>", "\n</parameter>", "\n</tool_call>"};
  GrammarMatcher matcher(compiled, nullptr);
  text->clear();
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  const auto weight = [&](int byte, bool past_budget) {
    if (past_budget) {
      for (const std::string& finisher : kFinishers) {
        for (size_t k = finisher.size() - 1; k > 0; --k) {
          if (text->size() >= k && text->compare(text->size() - k, k, finisher, 0, k) == 0 &&
              static_cast<unsigned char>(finisher[k]) == byte) {
            return 1000.0;
          }
        }
      }
      if (byte == '"' || byte == '}' || byte == ']' || byte == ')' || byte == '\n' || byte == '<') return 50.0;
    }
    if (byte >= 0x20 && byte < 0x7F) return 1.0;
    if (byte == '\n') return 0.3;
    return 0.02;
  };
  while (true) {
    const bool past_budget = text->size() > budget;
    if (matcher.CanEnd() && unit(random) < (past_budget ? 0.9 : 0.1)) return true;
    const std::bitset<256> allowed = matcher.AllowedNextBytes();
    if (allowed.none()) {
      REQUIRE(matcher.CanEnd());  // no dead ends
      return true;
    }
    if (text->size() >= cap) return false;
    double total = 0;
    for (int byte = 0; byte < 256; ++byte) total += allowed[byte] ? weight(byte, past_budget) : 0.0;
    double pick = unit(random) * total;
    int chosen = -1;
    for (int byte = 0; byte < 256; ++byte) {
      if (!allowed[byte]) continue;
      chosen = byte;
      pick -= weight(byte, past_budget);
      if (pick <= 0) break;
    }
    const std::string next(1, static_cast<char>(chosen));
    REQUIRE(matcher.AcceptBytes(next));
    *text += next;
  }
}

// Checks a hermes answer of calls: each a well-formed call of a known tool whose arguments hold its required
// properties with the right types. Returns the number of calls, or -1 when nlohmann cannot read a number.
int CheckHermesCalls(const std::string& text, const Json& tools) {
  std::string rest = text;
  while (!rest.empty() && (rest.back() == '\n' || rest.back() == ' ' || rest.back() == '\t' || rest.back() == '\r')) {
    rest.pop_back();
  }
  int calls = 0;
  const std::string open = "<tool_call>\n", close = "\n</tool_call>";
  while (true) {
    REQUIRE(absl::StartsWith(rest, open));
    const size_t end = rest.find(close);
    REQUIRE(end != std::string::npos);
    Json call;
    try {
      call = Json::parse(rest.substr(open.size(), end - open.size()));
    } catch (const nlohmann::json::out_of_range&) {
      return -1;  // valid JSON, but a number beyond a double (such as 1E400) that nlohmann refuses
    }
    REQUIRE(call.is_object());
    REQUIRE(call.size() == 2);
    REQUIRE(call.begin().key() == "name");
    const Json& arguments = call.at("arguments");
    REQUIRE(arguments.is_object());
    const Json* tool = nullptr;
    for (const Json& candidate : tools) {
      if (candidate["function"]["name"] == call["name"]) tool = &candidate["function"];
    }
    REQUIRE(tool != nullptr);
    const Json parameters = tool->value("parameters", Json::object());
    for (const Json& name : parameters.value("required", Json::array())) {
      REQUIRE(arguments.contains(name.get<std::string>()));
    }
    const Json properties = parameters.value("properties", Json::object());
    for (const auto& [name, schema] : properties.items()) {
      if (!arguments.contains(name)) continue;
      const Json& value = arguments[name];
      const std::string type = schema.value("type", "");
      if (type == "string") REQUIRE(value.is_string());
      if (type == "integer") REQUIRE(value.is_number_integer());
      if (type == "object") REQUIRE(value.is_object());
      if (type == "array") REQUIRE(value.is_array());
      if (schema.contains("enum")) {
        REQUIRE(std::find(schema["enum"].begin(), schema["enum"].end(), value) != schema["enum"].end());
      }
      if (schema.contains("minimum")) REQUIRE(value.get<double>() >= schema["minimum"].get<double>());
      if (schema.contains("maximum")) REQUIRE(value.get<double>() <= schema["maximum"].get<double>());
    }
    ++calls;
    rest = rest.substr(end + close.size());
    if (rest.empty()) return calls;
    REQUIRE(rest.front() == '\n');
    rest = rest.substr(1);
  }
}

TEST_CASE("tool-call grammar: random walks under REQUIRED give well-formed, valid hermes calls", "[unit]") {
  const Json tools = Json::parse(kTools);
  const auto compiled = Compile(Constraint("hermes", v1::TOOL_CHOICE_REQUIRED));
  std::mt19937 random(20250301);
  int complete = 0, calls = 0;
  std::string text;
  for (int attempt = 0; attempt < 300; ++attempt) {
    if (!Walk(compiled, random, 120, 4000, &text)) continue;
    INFO(text);
    const int made = CheckHermesCalls(text, tools);
    if (made < 0) continue;
    calls += made;
    ++complete;
  }
  CHECK(complete > 200);
  CHECK(calls > complete);  // some walks made several calls
}

TEST_CASE("tool-call grammar: random walks never reach a dead end, in every format and choice", "[unit]") {
  std::mt19937 random(7);
  std::string text;
  for (const FormatCase& c : Cases()) {
    for (const v1::ToolChoice choice : {v1::TOOL_CHOICE_REQUIRED, v1::TOOL_CHOICE_AUTO}) {
      v1::ToolCallConstraint constraint = Constraint(c.format, choice, true, StrictWeatherTools());
      constraint.set_reasoning_start("<think>");
      constraint.set_reasoning_end("</think>");
      const auto compiled = Compile(constraint);
      int complete = 0;
      for (int attempt = 0; attempt < 30; ++attempt) {
        INFO(c.format << " choice " << choice << " text " << text);
        complete += Walk(compiled, random, 100, 4000, &text) ? 1 : 0;
      }
      INFO(c.format << " choice " << choice);
      CHECK(complete > 20);
    }
  }
}

TEST_CASE("tool-call grammar: names the parser could not read back are refused", "[typed_output][grammar]") {
  const std::string spaced = R"([{"type":"function","function":{"name":"get weather"}}])";
  CHECK_THAT(Error(Constraint("hermes", v1::TOOL_CHOICE_REQUIRED, true, spaced)),
             Catch::StartsWith("tools[0].function.name: 'get weather'"));
  const std::string dashed =
      R"([{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"c-ty":{"type":"string"}}}}}])";
  CHECK_THAT(Error(Constraint("pythonic", v1::TOOL_CHOICE_REQUIRED, true, dashed)),
             Catch::Contains("the property 'c-ty'"));
  // Other formats write the property inside JSON or XML, where the name reads back.
  CHECK(Compile(Constraint("hermes", v1::TOOL_CHOICE_REQUIRED, true, dashed)) != nullptr);
  CHECK(Compile(Constraint("qwen3_coder", v1::TOOL_CHOICE_REQUIRED, true, dashed)) != nullptr);
  const std::string markup =
      R"([{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"a>b":{"type":"string"}}}}}])";
  CHECK_THAT(Error(Constraint("qwen3_coder", v1::TOOL_CHOICE_REQUIRED, true, markup)), Catch::Contains("'a>b'"));
}

}  // namespace
}  // namespace llmc::typed_output
