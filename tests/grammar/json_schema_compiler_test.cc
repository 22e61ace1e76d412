// The JSON Schema compiler (worker/grammar/json_schema_compiler.h), judged by what its grammars accept: each
// construct, integer and decimal ranges against brute force, refusals by keyword and location, and the
// corpus of realistic schemas (tests/grammar/schema_corpus.json; tests/python/test_schema_corpus.py checks
// the same corpus and the sampler's outputs against python3-jsonschema).
#include "worker/grammar/json_schema_compiler.h"

#include <cstdio>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "tests/support/catch.h"
#include "worker/grammar/automaton.h"
#include "worker/grammar/grammar.h"
#include "worker/grammar/matcher.h"

namespace llmc::grammar {
namespace {

using Json = nlohmann::ordered_json;

JsonSchemaOptions Options(bool strict = false, uint32_t max_whitespace = 0) {
  JsonSchemaOptions options;
  options.strict = strict;
  options.max_whitespace = max_whitespace;
  return options;
}

Grammar MustCompile(const Json& schema, const JsonSchemaOptions& options = {}) {
  absl::StatusOr<Grammar> grammar = CompileJsonSchema(schema, options);
  INFO("schema: " << schema.dump() << "  status: " << grammar.status().ToString());
  REQUIRE(grammar.ok());
  return *std::move(grammar);
}

bool Matches(const Grammar& grammar, const std::string& text) {
  absl::StatusOr<bool> matched = MatchesText(grammar, text);
  INFO("text: " << text << "  status: " << matched.status().ToString() << "\n" << grammar.ToString());
  REQUIRE(matched.ok());
  return *matched;
}

// Every text of `accepted` matches and none of `rejected` does.
void Check(const Json& schema, const std::vector<std::string>& accepted, const std::vector<std::string>& rejected,
           const JsonSchemaOptions& options = {}) {
  const Grammar grammar = MustCompile(schema, options);
  for (const std::string& text : accepted) {
    INFO("schema: " << schema.dump() << "  expected to accept: " << text);
    CHECK(Matches(grammar, text));
  }
  for (const std::string& text : rejected) {
    INFO("schema: " << schema.dump() << "  expected to reject: " << text);
    CHECK_FALSE(Matches(grammar, text));
  }
}

std::string Refusal(const Json& schema, const JsonSchemaOptions& options = {}) {
  absl::StatusOr<Grammar> grammar = CompileJsonSchema(schema, options);
  INFO("schema: " << schema.dump());
  REQUIRE_FALSE(grammar.ok());
  CHECK(grammar.status().code() == absl::StatusCode::kInvalidArgument);
  return std::string(grammar.status().message());
}

TEST_CASE("json schema primitive types and type arrays", "[grammar][json_schema]") {
  Check(Json::parse(R"({"type":"null"})"), {"null"}, {"nul", "false", "0", "\"null\""});
  Check(Json::parse(R"({"type":"boolean"})"), {"true", "false"}, {"null", "1", "True"});
  Check(Json::parse(R"({"type":"integer"})"), {"0", "-0", "7", "-12", "12345678901234567890"},
        {"01", "1.0", "1e3", "+1", "-", "", " 1"});
  Check(Json::parse(R"({"type":"number"})"), {"0", "-1.5", "3.25e-7", "1E+9", "10", "0.0"},
        {"01", ".5", "1.", "1e", "--1", "NaN", "Infinity"});
  Check(Json::parse(R"({"type":"string"})"), {R"("")", R"("abc")", R"("a\"b\\c/\n\t\r\b\f")"},
        {"abc", R"("a)", "\"a\nb\"", R"("\x")"});
  Check(Json::parse(R"({"type":["string","null"]})"), {R"("x")", "null"}, {"1", "{}"});
  Check(Json::parse(R"({"type":["integer","number"]})"), {"1", "1.5"}, {"\"1\""});
}

TEST_CASE("json schema true, false and empty schemas", "[grammar][json_schema]") {
  for (const Json& schema : {Json(true), Json::object()}) {
    Check(schema, {"1", "null", R"({"a":[1,{"b":"c"}],"d":true})", "[]", R"("s")"}, {"", "{", "[1,]", "nul"});
  }
  CHECK(Refusal(Json(false)).find("accepts no value") != std::string::npos);
  CHECK(Refusal(Json::parse(R"({"type":"integer","minimum":5,"maximum":4})")).find("no value") != std::string::npos);
}

TEST_CASE("json schema strings: canonical escapes only, lengths in code points", "[grammar][json_schema]") {
  // Generated strings spell every character one way: raw UTF-8, or the escape JSON requires (\u00XX only for
  // controls without a short escape). Other escapes are valid JSON a model never needs, so they are not offered.
  Check(Json::parse(R"({"type":"string"})"), {"\"\xC3\xA9\xF0\x9F\x98\x80\"", R"("\u001f")", R"("\u0000")"},
        {R"("\u00e9\u0041")", R"("\ud83d\ude00")", R"("\/")", R"("\ud83d")", R"("\u12")", "\"\x01\""});
  const Json bounded = Json::parse(R"({"type":"string","minLength":2,"maxLength":3})");
  Check(bounded,
        {R"("ab")", R"("abc")", R"("\n\"")", "\"\xC3\xA9\xC3\xA9\"",
         "\"\xF0\x9F\x98\x80"
         "a\""},
        {R"("a")", R"("abcd")", "\"\xF0\x9F\x98\x80\"", R"("")"});
  Check(Json::parse(R"({"type":"string","maxLength":0})"), {R"("")"}, {R"("a")"});
  Check(Json::parse(R"({"type":"string","minLength":100})"), {"\"" + std::string(100, 'x') + "\""},
        {"\"" + std::string(99, 'x') + "\""});
  Check(Json::parse(R"({"type":"string","maxLength":300})"), {"\"" + std::string(300, 'x') + "\""},
        {"\"" + std::string(301, 'x') + "\""});
}

// Long lengths count through chunk rules: every length around the chunk boundaries.
TEST_CASE("json schema string lengths at every count", "[grammar][json_schema]") {
  const std::vector<std::pair<uint32_t, uint32_t>> bounds = {{0, 33}, {21, 37}, {16, 16}, {17, 100}, {40, kUnbounded}};
  for (const auto& [min, max] : bounds) {
    Json schema = Json::parse(R"({"type":"string"})");
    schema["minLength"] = min;
    if (max != kUnbounded) schema["maxLength"] = max;
    absl::StatusOr<std::shared_ptr<const CompiledGrammar>> compiled = CompileGrammar(MustCompile(schema));
    REQUIRE(compiled.ok());
    for (uint32_t length = 0; length <= 120; ++length) {
      std::string text = "\"";
      for (uint32_t i = 0; i < length; ++i) text += i % 7 == 3 ? "\\n" : i % 11 == 5 ? "\xC3\xA9" : "a";
      text += "\"";
      GrammarMatcher matcher(*compiled, nullptr);
      INFO(schema.dump() << " length " << length);
      CHECK((matcher.AcceptBytes(text) && matcher.CanEnd()) == (length >= min && length <= max));
    }
  }
}

// Every integer in [-300, 300] against the bounds, for many bound combinations.
TEST_CASE("json schema integer ranges match brute force", "[grammar][json_schema]") {
  const std::vector<int> bounds = {-201, -100, -99, -10, -9, -1, 0, 1, 9, 10, 99, 100, 101, 250};
  std::mt19937 random(7);
  for (int round = 0; round < 60; ++round) {
    Json schema = Json::parse(R"({"type":"integer"})");
    const int lo = bounds[random() % bounds.size()];
    const int hi = bounds[random() % bounds.size()];
    const bool lo_exclusive = random() % 2;
    const bool hi_exclusive = random() % 2;
    const bool has_lo = random() % 5 != 0;
    const bool has_hi = random() % 5 != 0;
    if (has_lo) schema[lo_exclusive ? "exclusiveMinimum" : "minimum"] = lo;
    if (has_hi) schema[hi_exclusive ? "exclusiveMaximum" : "maximum"] = hi;
    const auto inside = [&](int value) {
      if (has_lo && (lo_exclusive ? value <= lo : value < lo)) return false;
      if (has_hi && (hi_exclusive ? value >= hi : value > hi)) return false;
      return true;
    };
    bool any = false;
    for (int value = -300; value <= 300; ++value) any |= inside(value);
    absl::StatusOr<Grammar> grammar = CompileJsonSchema(schema, {});
    if (!any && has_lo && has_hi) {
      CHECK_FALSE(grammar.ok());
      continue;
    }
    INFO(schema.dump());
    REQUIRE(grammar.ok());
    absl::StatusOr<std::shared_ptr<const CompiledGrammar>> compiled = CompileGrammar(*grammar);
    REQUIRE(compiled.ok());
    for (int value = -300; value <= 300; ++value) {
      GrammarMatcher matcher(*compiled, nullptr);
      const std::string text = std::to_string(value);
      INFO(schema.dump() << " value " << text);
      CHECK((matcher.AcceptBytes(text) && matcher.CanEnd()) == inside(value));
    }
    CHECK_FALSE(Matches(*grammar, "007"));
  }
  Check(Json::parse(R"({"type":"integer","minimum":1.5,"maximum":4.5})"), {"2", "3", "4"}, {"1", "5", "2.0"});
  Check(Json::parse(R"({"type":"integer","minimum":9007199254740993})"), {"9007199254740993", "99999999999999999999"},
        {"9007199254740992", "-1"});
  Check(Json::parse(R"({"type":"integer","multipleOf":1,"minimum":0})"), {"0", "5"}, {"-5"});
}

TEST_CASE("json schema number bounds, with fractions decided digit by digit", "[grammar][json_schema]") {
  Check(Json::parse(R"({"type":"number","minimum":0,"maximum":1})"), {"0", "0.0", "0.5", "0.999", "1", "1.0", "1.000"},
        {"1.0001", "-0.1", "2", "-1", "1e-3", "10"});
  Check(Json::parse(R"({"type":"number","exclusiveMinimum":0,"exclusiveMaximum":1})"), {"0.5", "0.00001", "0.99999"},
        {"0", "0.0", "1", "1.0", "-0.5", "0.000000000000000001"});
  Check(Json::parse(R"({"type":"number","minimum":-2.5,"maximum":3.75})"),
        {"-2.5", "-2.49", "-2", "-0.1", "0", "3", "3.75", "3.7500", "3.7"}, {"-2.51", "-3", "3.751", "3.8", "4"});
  Check(Json::parse(R"({"type":"number","minimum":0.01})"), {"0.01", "0.011", "0.1", "1", "1000.5"},
        {"0.0099", "0.001", "0", "-1"});
  Check(Json::parse(R"({"type":"number","maximum":-0.5})"), {"-0.5", "-0.50", "-1", "-1000.25"},
        {"-0.49", "0", "0.5", "-0.4999"});
  Check(Json::parse(R"({"type":"number","exclusiveMaximum":100,"minimum":99.5})"), {"99.5", "99.99"},
        {"100", "100.0", "99.4"});
  CHECK(Refusal(Json::parse(R"({"type":"number","multipleOf":0.5})")).find("'multipleOf'") != std::string::npos);
  CHECK(Refusal(Json::parse(R"({"type":"number","exclusiveMinimum":1e20})")).find("'exclusiveMinimum'") !=
        std::string::npos);
}

TEST_CASE("json schema enum and const, serialized compactly", "[grammar][json_schema]") {
  Check(Json::parse(R"({"enum":["red","green",null,1,{"a":[1,2]}]})"),
        {R"("red")", R"("green")", "null", "1", R"({"a":[1,2]})"}, {R"("blue")", "2", R"({"a":[1]})"});
  Check(Json::parse(R"({"type":"string","enum":["a","b",3]})"), {R"("a")", R"("b")"}, {"3"});
  Check(Json::parse(R"({"const":"fixed"})"), {R"("fixed")"}, {R"("other")"});
  Check(Json::parse(R"({"enum":["a","bb","ccc"],"minLength":2})"), {R"("bb")", R"("ccc")"}, {R"("a")"});
  Check(Json::parse(R"({"type":"integer","enum":[1,5,10],"maximum":5})"), {"1", "5"}, {"10"});
  Check(Json::parse(R"({"const":"line\nbreak \"q\""})"), {R"("line\nbreak \"q\"")"}, {});
  // Numbers beyond int64 (found by fuzzing): a whole 1e26 is an integer, not a cast out of range.
  Check(Json::parse(R"({"type":"integer","enum":[177777777777777777777777777,2.5,3]})"), {"3"}, {"2.5"});
  CHECK(CompileJsonSchema(Json::parse(R"({"type":"array","maxItems":1e30})"), {}).ok());
  // pattern beside enum: search semantics, checked by the project's own regex matcher.
  Check(Json::parse(R"({"enum":["apple","grape","kiwi"],"pattern":"^[ag]"})"), {R"("apple")", R"("grape")"},
        {R"("kiwi")"});
  Check(Json::parse(R"({"enum":["xay","b"],"pattern":"a"})"), {R"("xay")"}, {R"("b")"});
  // A value long enough to overflow std::regex's recursive matcher is checked in one pass.
  const std::string long_value(200000, 'a');
  const Json long_enum = {{"enum", {long_value + "b", "c"}}, {"pattern", "^(a|b)*$"}};
  CHECK(CompileJsonSchema(long_enum, {}).ok());
  CHECK_THAT(Refusal(Json::parse(R"x({"enum":["a"],"pattern":"(?=a)"})x")), Catch::Contains("pattern"));
}

TEST_CASE("json schema objects: order, required and optional members, commas", "[grammar][json_schema]") {
  const Json schema = Json::parse(
      R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"string"},"c":{"type":"boolean"}},
          "required":["b"],"additionalProperties":false})");
  Check(schema, {R"({"b":"x"})", R"({"a":1,"b":"x"})", R"({"b":"x","c":true})", R"({"a":1,"b":"x","c":false})"},
        {"{}", R"({"a":1})", R"({"b":"x","a":1})", R"({"a":1,,"b":"x"})", R"({,"b":"x"})", R"({"b":"x",})",
         R"({"b":"x","d":1})", R"({"b":"x","b":"y"})"});
  const Json all_optional = Json::parse(
      R"({"type":"object","properties":{"p":{"type":"integer"},"q":{"type":"integer"},"r":{"type":"integer"},
          "s":{"type":"integer"},"t":{"type":"integer"}},"additionalProperties":false})");
  Check(all_optional, {"{}", R"({"p":1})", R"({"t":1})", R"({"q":1,"s":2})", R"({"p":1,"q":2,"r":3,"s":4,"t":5})"},
        {R"({"q":1,"p":2})", R"({,"t":1})", R"({"p":1,})"});
}

TEST_CASE("json schema additional properties exclude the listed keys", "[grammar][json_schema]") {
  const Json open = Json::parse(
      R"({"type":"object","properties":{"id":{"type":"integer"},"name":{"type":"string"}},"required":["id"]})");
  Check(open,
        {R"({"id":1})", R"({"id":1,"extra":[1]})", R"({"id":1,"name":"n","x":null,"y":{}})", R"({"id":1,"i":1})",
         R"({"id":1,"ids":1})", R"({"id":1,"nam":2})", R"({"id":1,"names":2})", R"({"id":1,"":2})"},
        {R"({"id":1,"id":2})", R"({"id":1,"x":1,"name":"n"})", R"({"id":1,"\u0069d":2})"});
  const Json typed = Json::parse(R"({"type":"object","additionalProperties":{"type":"integer"}})");
  Check(typed, {"{}", R"({"a":1,"b":2})"}, {R"({"a":"x"})"});
  const Json strict = Json::parse(R"({"type":"object","properties":{"a":{"type":"integer"}}})");
  Check(strict, {R"({"a":1})", "{}"}, {R"({"a":1,"b":2})"}, Options(/*strict=*/true));
  Check(strict, {R"({"a":1,"b":2})"}, {}, Options(/*strict=*/false));
  // A required name that properties does not list is an additional member that must be there.
  Check(Json::parse(R"({"type":"object","required":["k"],"additionalProperties":{"type":"string"}})"),
        {R"({"k":"v"})", R"({"k":"v","z":"w"})"}, {"{}", R"({"z":"w"})", R"({"k":1})"});
}

TEST_CASE("json schema minProperties and maxProperties", "[grammar][json_schema]") {
  const Json schema = Json::parse(
      R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"integer"},"c":{"type":"integer"}},
          "minProperties":1,"maxProperties":2,"additionalProperties":false})");
  Check(schema, {R"({"a":1})", R"({"c":1})", R"({"a":1,"c":2})"}, {"{}", R"({"a":1,"b":2,"c":3})"});
  const Json map = Json::parse(R"({"type":"object","additionalProperties":{"type":"integer"},"maxProperties":2})");
  Check(map, {"{}", R"({"x":1})", R"({"x":1,"y":2})"}, {R"({"x":1,"y":2,"z":3})"});
  Check(Json::parse(R"({"type":"object","minProperties":2})"), {R"({"x":1,"y":2})"}, {"{}", R"({"x":1})"});
}

TEST_CASE("json schema patternProperties and propertyNames", "[grammar][json_schema]") {
  Check(Json::parse(R"({"type":"object","patternProperties":{"^[a-z]+$":{"type":"integer"}},
                        "additionalProperties":false})"),
        {"{}", R"({"ab":1,"c":2})"}, {R"({"A":1})", R"({"ab":"x"})"});
  Check(Json::parse(R"({"type":"object","propertyNames":{"maxLength":3},"additionalProperties":{"type":"integer"}})"),
        {R"({"abc":1})"}, {R"({"abcd":1})"});
  CHECK(Refusal(Json::parse(R"({"type":"object","properties":{"a":{}},"patternProperties":{"^x":{}}})"))
            .find("'patternProperties'") != std::string::npos);
}

TEST_CASE("json schema arrays: items, prefixItems, minItems and maxItems", "[grammar][json_schema]") {
  Check(Json::parse(R"({"type":"array","items":{"type":"integer"}})"), {"[]", "[1]", "[1,2,3]"},
        {"[1,]", "[,1]", R"([1,"a"])", "[1 2]"});
  Check(Json::parse(R"({"type":"array","items":{"type":"integer"},"minItems":2,"maxItems":3})"), {"[1,2]", "[1,2,3]"},
        {"[]", "[1]", "[1,2,3,4]"});
  const Json tuple = Json::parse(
      R"({"type":"array","prefixItems":[{"type":"string"},{"type":"integer"}],"items":false,"minItems":1})");
  Check(tuple, {R"(["a"])", R"(["a",1])"}, {"[]", R"(["a",1,2])", "[1]", R"(["a","b"])"});
  const Json tuple_open =
      Json::parse(R"({"type":"array","prefixItems":[{"type":"string"}],"items":{"type":"boolean"}})");
  Check(tuple_open, {"[]", R"(["a"])", R"(["a",true,false])"}, {"[true]", R"(["a","b"])"});
  Check(Json::parse(R"({"type":"array","maxItems":0})"), {"[]"}, {"[1]"});
  Check(Json::parse(R"({"type":"array","items":false})"), {"[]"}, {"[1]"});
  Check(Json::parse(R"({"type":"array","items":{"enum":["x","y"]},"maxItems":40})"),
        {"[" + std::string("\"x\",") + "\"y\"]"}, {"[\"z\"]"});
}

TEST_CASE("json schema formats produce only valid values", "[grammar][json_schema]") {
  const auto format = [](const char* name) { return Json{{"type", "string"}, {"format", name}}; };
  Check(format("date"), {R"("2024-02-29")", R"("2000-02-29")", R"("1999-12-31")", R"("0001-01-01")"},
        {R"("2023-02-29")", R"("1900-02-29")", R"("2024-04-31")", R"("2024-13-01")", R"("0000-01-01")",
         R"("2024-1-01")"});
  Check(format("time"), {R"("23:59:59Z")", R"("00:00:00.123+05:30")", R"("12:30:00-08:00")"},
        {R"("24:00:00Z")", R"("12:60:00Z")", R"("12:00:00")", R"("12:00Z")"});
  Check(format("date-time"), {R"("2024-05-01T10:20:30Z")", R"("2024-05-01T10:20:30.5+01:00")"},
        {R"("2024-05-01 10:20:30Z")", R"("2024-05-01T10:20:30")"});
  Check(format("duration"), {R"("P1D")", R"("PT1H30M")", R"("P1Y2M3DT4H5M6S")", R"("P2W")", R"("PT0S")"},
        {R"("P")", R"("PT")", R"("P1H")", R"("1D")", R"("P1Y3D")"});
  Check(format("uuid"), {R"("123e4567-e89b-12d3-a456-426614174000")"},
        {R"("123e4567e89b12d3a456426614174000")", R"("123e4567-e89b-12d3-a456-42661417400g")"});
  Check(format("email"), {R"("a.b+c@example.com")", R"("x@localhost")"},
        {R"("a@")", R"("@b.com")", R"("a..b@c.com")", R"("a b@c.com")"});
  Check(format("hostname"), {R"("example.com")", R"("a-b.c")", R"("localhost")"},
        {R"("-a.com")", R"("a-.com")", R"("a..b")", R"("")"});
  Check(format("ipv4"), {R"("192.168.0.1")", R"("0.0.0.0")", R"("255.255.255.255")"},
        {R"("256.1.1.1")", R"("01.2.3.4")", R"("1.2.3")"});
  Check(format("ipv6"),
        {R"("::1")", R"("::")", R"("2001:db8::8a2e:370:7334")", R"("::ffff:192.0.2.1")", R"("1:2:3:4:5:6:7:8")"},
        {R"("1:2:3:4:5:6:7:8:9")", R"("1::2::3")", R"(":1")", R"("12345::")"});
  Check(format("uri"),
        {R"("https://example.com/a/b?x=1#frag")", R"("mailto:a@b.c")", R"("urn:isbn:123")", R"("http://[::1]:8080/")",
         R"("file:///etc/hosts")"},
        {R"("example.com")", R"("http://exa mple.com")", R"("1http://x")", R"("http://x/%zz")"});
  CHECK(Refusal(format("color")).find("'format'") != std::string::npos);
  // Every day of the months of some leap and common years, centuries included.
  const Grammar dates = MustCompile(format("date"));
  for (const int year : {1900, 1996, 2000, 2023, 2024, 2100, 2400}) {
    const bool leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
    for (int month = 1; month <= 12; ++month) {
      const int days = month == 2                                                ? (leap ? 29 : 28)
                       : (month == 4 || month == 6 || month == 9 || month == 11) ? 30
                                                                                 : 31;
      for (int day = 1; day <= 31; ++day) {
        char text[16];
        std::snprintf(text, sizeof(text), "\"%04d-%02d-%02d\"", year, month, day);
        INFO(text);
        CHECK(Matches(dates, text) == (day <= days));
      }
    }
  }
  Check(Json::parse(R"({"type":"string","format":"uuid","maxLength":36})"),
        {R"("123e4567-e89b-12d3-a456-426614174000")"}, {});
  CHECK(Refusal(Json::parse(R"({"type":"string","format":"email","maxLength":50})")).find("'maxLength'") !=
        std::string::npos);
}

TEST_CASE("json schema pattern", "[grammar][json_schema]") {
  Check(Json::parse(R"({"type":"string","pattern":"^[A-Z]{3}-\\d{3}$"})"), {R"("ABC-123")"},
        {R"("AB-123")", R"("abc-123")", R"("ABC-1234")"});
  Check(Json::parse(R"({"type":"string","pattern":"foo"})"), {R"("foo")", R"("xfooy")"}, {R"("fo")"});
  Check(Json::parse(R"({"type":"string","pattern":"^[a-z_]+$","maxLength":4})"), {R"("ab_c")", R"("a")"},
        {R"("abcde")", R"("")"});
}

TEST_CASE("json schema anyOf, oneOf and allOf", "[grammar][json_schema]") {
  Check(Json::parse(R"({"anyOf":[{"type":"string"},{"type":"integer","minimum":0}]})"), {R"("a")", "3"},
        {"-3", "null"});
  Check(Json::parse(R"({"oneOf":[{"type":"string"},{"type":"null"}]})"), {R"("a")", "null"}, {"1"});
  const Json tagged = Json::parse(R"({"oneOf":[
      {"type":"object","properties":{"kind":{"const":"a"},"x":{"type":"integer"}},"required":["kind","x"]},
      {"type":"object","properties":{"kind":{"const":"b"},"y":{"type":"string"}},"required":["kind","y"]}]})");
  Check(tagged, {R"({"kind":"a","x":1})", R"({"kind":"b","y":"s"})"}, {R"({"kind":"a","y":"s"})"});
  CHECK(Refusal(Json::parse(R"({"oneOf":[{"type":"integer"},{"type":"number"}]})")).find("'oneOf'") !=
        std::string::npos);
  const Json merged = Json::parse(R"({"allOf":[
      {"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]},
      {"properties":{"b":{"type":"string"}},"required":["b"]},
      {"properties":{"a":{"minimum":0}}}]})");
  Check(merged, {R"({"a":1,"b":"x"})"}, {R"({"a":-1,"b":"x"})", R"({"a":1})", R"({"b":"x"})"});
  Check(Json::parse(R"({"allOf":[{"type":"integer","minimum":0},{"maximum":10},{"exclusiveMaximum":5}]})"), {"0", "4"},
        {"5", "-1"});
  // Siblings of anyOf apply to every branch.
  Check(Json::parse(R"({"type":"object","properties":{"id":{"type":"integer"}},"required":["id"],
                        "anyOf":[{"properties":{"a":{"type":"string"}},"required":["a"]},
                                 {"properties":{"b":{"type":"string"}},"required":["b"]}]})"),
        {R"({"id":1,"a":"x"})", R"({"id":2,"b":"y"})"}, {R"({"id":1})", R"({"a":"x"})"});
  // One side's items cover the other's prefixItems positions.
  Check(Json::parse(R"({"type":"array","allOf":[{"items":{"type":"integer"}},
                        {"prefixItems":[{"minimum":5}],"items":{"maximum":9}}]})"),
        {"[]", "[5]", "[5,9]"}, {"[4]", "[\"a\"]", "[5,10]", "[5.5]"});
  CHECK(Refusal(Json::parse(R"({"allOf":[{"pattern":"a"},{"pattern":"b"}]})")).find("'pattern'") != std::string::npos);
}

TEST_CASE("json schema $ref: definitions, recursion, pointer escapes", "[grammar][json_schema]") {
  const Json tree = Json::parse(R"({"$defs":{"node":{"type":"object","properties":{
      "value":{"type":"integer"},"children":{"type":"array","items":{"$ref":"#/$defs/node"}}},
      "required":["value"],"additionalProperties":false}},"$ref":"#/$defs/node"})");
  Check(tree, {R"({"value":1})", R"({"value":1,"children":[{"value":2,"children":[]},{"value":3}]})"},
        {R"({"value":1,"children":[{}]})", "{}"});
  const Json list = Json::parse(R"({"type":"object","properties":{"head":{"type":"string"},
      "tail":{"anyOf":[{"$ref":"#"},{"type":"null"}]}},"required":["head","tail"]})");
  Check(list, {R"({"head":"a","tail":null})", R"({"head":"a","tail":{"head":"b","tail":null}})"}, {R"({"head":"a"})"});
  const Json escaped = Json::parse(R"({"definitions":{"a/b":{"type":"integer"},"c~d":{"type":"string"},
      "e f":{"type":"null"}},"type":"array","prefixItems":[{"$ref":"#/definitions/a~1b"},
      {"$ref":"#/definitions/c~0d"},{"$ref":"#/definitions/e%20f"}]})");
  Check(escaped, {R"([1,"s",null])"}, {R"(["s",1,null])"});
  // One rule per definition, however often it is referenced.
  const Grammar grammar = MustCompile(Json::parse(R"({"$defs":{"p":{"type":"object","properties":{
      "x":{"type":"number"}}}},"type":"object","properties":{"a":{"$ref":"#/$defs/p"},"b":{"$ref":"#/$defs/p"},
      "c":{"type":"array","items":{"$ref":"#/$defs/p"}}}})"));
  int definition_rules = 0;
  for (const Rule& rule : grammar.rules) definition_rules += rule.name == "defs-p";
  CHECK(definition_rules == 1);
  CHECK(Refusal(Json::parse(R"({"$ref":"https://example.com/schema.json"})")).find("'$ref'") != std::string::npos);
  CHECK(Refusal(Json::parse(R"({"$ref":"#/$defs/missing"})")).find("'$ref'") != std::string::npos);
  // $ref with sibling keywords applies both.
  Check(Json::parse(R"({"$defs":{"n":{"type":"integer"}},"$ref":"#/$defs/n","minimum":3})"), {"3"}, {"2"});
}

TEST_CASE("json schema refusals name the keyword and where it is", "[grammar][json_schema]") {
  CHECK(Refusal(Json::parse(R"({"type":"object","properties":{"tags":{"type":"array","uniqueItems":true}}})")) ==
        "unsupported JSON Schema keyword 'uniqueItems' at /properties/tags: a grammar cannot enforce distinct items");
  CHECK(Refusal(Json::parse(R"({"type":"array","contains":{"type":"integer"}})")) ==
        "unsupported JSON Schema keyword 'contains' at the root");
  CHECK(Refusal(Json::parse(R"({"properties":{"a/b":{"not":{"type":"null"}}}})")) ==
        "unsupported JSON Schema keyword 'not' at /properties/a~1b");
  CHECK(Refusal(Json::parse(R"({"if":{},"then":{}})")).find("'if'") != std::string::npos);
  CHECK(Refusal(Json::parse(R"({"type":"object","dependentRequired":{"a":["b"]}})")).find("'dependentRequired'") !=
        std::string::npos);
  CHECK(Refusal(Json::parse(R"({"type":"integer","multipleOf":3})")).find("'multipleOf'") != std::string::npos);
  CHECK(Refusal(Json::parse(R"({"type":"strin"})")).find("'type'") != std::string::npos);
  CHECK(Refusal(Json::parse(R"({"$defs":{"x":{"$id":"https://e.com/x","$ref":"#/$defs/y","$defs":{"y":{}}}},
      "$ref":"#/$defs/x"})")) ==
        "unsupported JSON Schema keyword '$id' at /$defs/x: an embedded resource's own "
        "'#' references");
  CHECK(Refusal(Json::parse(R"({"type":"object","patternProperties":{"^a":{}},"propertyNames":{"maxLength":2},
      "additionalProperties":false})"))
            .find("'propertyNames'") != std::string::npos);
  // Cycles of references that consume nothing terminate (and the oneOf cannot be proven disjoint).
  CHECK(Refusal(Json::parse(R"({"$defs":{"e":{"anyOf":[{"$ref":"#/$defs/e"},{"$ref":"#/$defs/e"}]}},
      "oneOf":[{"$ref":"#/$defs/e"},{"type":"null"}]})"))
            .find("'oneOf'") != std::string::npos);
  CHECK(Refusal(Json::parse(R"({"allOf":[{"$ref":"#"}]})")).find("'allOf'") != std::string::npos);
  // Metadata is ignored; uniqueItems false asserts nothing.
  MustCompile(Json::parse(R"({"$schema":"https://json-schema.org/draft/2020-12/schema","$id":"x","title":"t",
      "description":"d","$comment":"c","examples":[1],"default":1,"deprecated":false,"readOnly":true,
      "writeOnly":false,"type":"array","uniqueItems":false})"));
}

TEST_CASE("json schema whitespace option", "[grammar][json_schema]") {
  const Json schema = Json::parse(
      R"({"type":"object","properties":{"a":{"type":"array","items":{"type":"integer"}}},"required":["a"]})");
  Check(schema, {R"({"a":[1,2]})", "{ \"a\" : [ 1 ,\n2 ] }", "\t{\"a\":[]}\n", "{ \"a\":[ ] }"},
        {"{   \"a\":[]}", "{\"a\":[1, ,2]}"}, Options(false, 2));
  Check(schema, {R"({"a":[1,2]})"}, {R"({ "a":[1,2]})", R"({"a": [1,2]})"}, Options(false, 0));
}

TEST_CASE("json object grammar: any JSON object", "[grammar][json_schema]") {
  const Grammar grammar = JsonObjectGrammar(Options());
  CHECK(Matches(grammar, "{}"));
  CHECK(Matches(grammar, R"({"a":{"b":[1,2.5,"c",null,true,{}]},"d":"e"})"));
  CHECK_FALSE(Matches(grammar, "[]"));
  CHECK_FALSE(Matches(grammar, R"("x")"));
  CHECK_FALSE(Matches(grammar, R"({"a":})"));
  const Grammar spaced = JsonObjectGrammar(Options(false, 3));
  CHECK(Matches(spaced, "{ \"a\" : 1 }"));
}

// The corpus: every schema not marked refused compiles, and its grammar accepts each valid instance (written
// as nlohmann::ordered_json's dump writes it) and rejects each invalid one.
TEST_CASE("json schema corpus", "[grammar][json_schema]") {
  std::ifstream file(LLMC_SOURCE_DIR "/tests/grammar/schema_corpus.json");
  REQUIRE(file.good());
  const Json corpus = Json::parse(file);
  REQUIRE(corpus.size() >= 220);
  size_t refused = 0;
  for (const Json& entry : corpus) {
    const std::string name = entry.at("name").get<std::string>();
    INFO("corpus entry: " << name);
    const JsonSchemaOptions options = Options(entry.value("strict", false));
    absl::StatusOr<Grammar> grammar = CompileJsonSchema(entry.at("schema"), options);
    if (entry.contains("refused")) {
      ++refused;
      REQUIRE_FALSE(grammar.ok());
      const std::string keyword = entry.at("refused").get<std::string>();
      CHECK_THAT(std::string(grammar.status().message()), Catch::Contains("'" + keyword + "'"));
      continue;
    }
    INFO(grammar.status().ToString());
    REQUIRE(grammar.ok());
    absl::StatusOr<std::shared_ptr<const CompiledGrammar>> compiled = CompileGrammar(*grammar);
    INFO(compiled.status().ToString());
    REQUIRE(compiled.ok());
    const auto matches = [&](const std::string& text) {
      GrammarMatcher matcher(*compiled, nullptr);
      return matcher.AcceptBytes(text) && matcher.CanEnd();
    };
    for (const Json& instance : entry.at("valid")) {
      INFO("valid instance: " << instance.dump());
      CHECK(matches(instance.dump()));
    }
    for (const Json& instance : entry.at("invalid")) {
      INFO("invalid instance: " << instance.dump());
      CHECK_FALSE(matches(instance.dump()));
    }
  }
  // At least 95% of the corpus compiles.
  CHECK(refused * 20 <= corpus.size());
}

TEST_CASE("json schema: OpenAPI's nullable adds null", "[grammar][json_schema]") {
  Check(Json::parse(R"({"type":"object","properties":{"a":{"type":"integer","nullable":true}},"required":["a"]})"),
        {R"({"a":1})", R"({"a":null})"}, {R"({"a":"x"})", R"({})"});
  Check(Json::parse(R"({"type":"string","nullable":false})"), {R"("x")"}, {"null"});
  CHECK(Refusal(Json::parse(R"({"type":"string","nullable":"yes"})")).find("'nullable'") != std::string::npos);
}

// Found in review: the "any other key" trie of an open object is as deep as its longest listed key, and a
// 10,000-character name overflowed the stack. Names are bounded instead.
TEST_CASE("json schema: property names beyond 256 bytes are refused by name", "[grammar][json_schema]") {
  Json schema = Json::parse(R"({"type":"object","properties":{}})");
  schema["properties"][std::string(10000, 'a')] = Json::parse(R"({"type":"null"})");
  CHECK(Refusal(schema).find("'properties'") != std::string::npos);
  Json required = Json::parse(R"({"type":"object"})");
  required["required"] = Json::array({std::string(300, 'b')});
  CHECK(Refusal(required).find("'required'") != std::string::npos);
  Json fits = Json::parse(R"({"type":"object","properties":{}})");
  const std::string name(256, 'c');
  fits["properties"][name] = Json::parse(R"({"type":"null"})");
  Check(fits, {"{\"" + name + "\":null}", "{\"" + name + "\":null,\"d\":1}", "{}"},
        {"{\"" + name + "\":null,\"" + name + "\":null}"});
}

}  // namespace
}  // namespace llmc::grammar
