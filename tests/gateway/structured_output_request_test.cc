// Structured outputs and token restrictions on /v1/chat/completions and /v1/completions (response_format,
// structured_outputs, guided_*, logit_bias, allowed_token_ids, bad_words): what reaches SamplingParams, and
// every refusal naming its parameter.
#include "gateway/openai/structured_output_request.h"

#include <string>
#include <utility>
#include <vector>

#include "common/request_limits.h"
#include "gateway/openai/openai_request.h"
#include "nlohmann/json.hpp"
#include "tests/gateway/openai_request_parsing.h"
#include "tests/support/catch.h"

namespace llmc::gateway {
namespace {

using nlohmann::json;

// Chat and completions take the same fields.
absl::StatusOr<OpenAiRequest> Parse(bool chat, const json& extra) { return chat ? Chat(extra) : Completion(extra); }

// The body with `fields` (raw JSON text, keys in the order written) spliced in, so key order survives.
absl::StatusOr<OpenAiRequest> ParseRaw(bool chat, const std::string& fields) {
  const std::string input = chat ? R"("messages":[{"role":"user","content":"hi"}])" : R"("prompt":"Once upon a time")";
  const std::string body = R"({"model":"qwen",)" + input + "," + fields + "}";
  return chat ? ParseChatCompletionRequest(body) : ParseCompletionRequest(body);
}

// A copy: the request is usually a temporary.
v1::OutputConstraint ConstraintOf(const absl::StatusOr<OpenAiRequest>& request) {
  REQUIRE(request.ok());
  REQUIRE(request->generate.sampling().has_constraint());
  return request->generate.sampling().constraint();
}

// A schema whose properties are not in sorted order, and its compact text.
constexpr const char* kUnsortedSchema =
    R"({"type":"object","properties":{"b":{"type":"string"},"a":{"type":"integer"}},"required":["b","a"]})";

TEST_CASE("structured_output: response_format json_object and text", "[unit][openai]") {
  for (const bool chat : {true, false}) {
    INFO((chat ? "chat" : "completion"));
    const v1::OutputConstraint c = ConstraintOf(Parse(chat, {{"response_format", {{"type", "json_object"}}}}));
    CHECK(c.kind_case() == v1::OutputConstraint::kJsonObject);
    CHECK(c.json_object());
    CHECK(c.source() == "response_format");
    CHECK_FALSE(c.strict());
    const absl::StatusOr<OpenAiRequest> text = Parse(chat, {{"response_format", {{"type", "text"}}}});
    REQUIRE(text.ok());
    CHECK_FALSE(text->generate.sampling().has_constraint());
    const absl::StatusOr<OpenAiRequest> none = Parse(chat, {{"response_format", nullptr}, {"guided_json", nullptr}});
    REQUIRE(none.ok());
    CHECK_FALSE(none->generate.sampling().has_constraint());
  }
}

TEST_CASE("structured_output: response_format json_schema keeps the client's key order", "[unit][openai]") {
  for (const bool chat : {true, false}) {
    INFO((chat ? "chat" : "completion"));
    const std::string format =
        std::string(R"("response_format":{"type":"json_schema","json_schema":{"name":"pt-1_x",)") +
        R"("description":"a point","strict":true,"schema":)" + kUnsortedSchema + "}}";
    const v1::OutputConstraint c = ConstraintOf(ParseRaw(chat, format));
    CHECK(c.kind_case() == v1::OutputConstraint::kJsonSchema);
    CHECK(c.json_schema() == kUnsortedSchema);
    CHECK(c.strict());
    CHECK(c.source() == "response_format");
    // strict defaults to false, and a boolean is a schema too.
    const json boolean = {{"type", "json_schema"}, {"json_schema", {{"name", "any"}, {"schema", true}}}};
    const v1::OutputConstraint b = ConstraintOf(Parse(chat, {{"response_format", boolean}}));
    CHECK(b.json_schema() == "true");
    CHECK_FALSE(b.strict());
  }
}

TEST_CASE("structured_output: every kind of structured_outputs", "[unit][openai]") {
  for (const bool chat : {true, false}) {
    INFO((chat ? "chat" : "completion"));
    const v1::OutputConstraint schema =
        ConstraintOf(ParseRaw(chat, std::string(R"("structured_outputs":{"json":)") + kUnsortedSchema + "}"));
    CHECK(schema.json_schema() == kUnsortedSchema);
    CHECK(schema.source() == "structured_outputs.json");
    CHECK_FALSE(schema.strict());
    // A string holding the schema: its order is kept too, and it is printed compact.
    const json as_text = {{"json", R"({"properties": {"z": {}, "y": {}}})"}, {"json_object", false}};
    const v1::OutputConstraint text = ConstraintOf(Parse(chat, {{"structured_outputs", as_text}}));
    CHECK(text.json_schema() == R"({"properties":{"z":{},"y":{}}})");
    const v1::OutputConstraint regex = ConstraintOf(Parse(chat, {{"structured_outputs", {{"regex", "[0-9]+"}}}}));
    CHECK(regex.regex() == "[0-9]+");
    CHECK(regex.source() == "structured_outputs.regex");
    const v1::OutputConstraint choice =
        ConstraintOf(Parse(chat, {{"structured_outputs", {{"choice", {"yes", "no", ""}}, {"regex", nullptr}}}}));
    REQUIRE(choice.kind_case() == v1::OutputConstraint::kChoice);
    CHECK(std::vector<std::string>(choice.choice().choices().begin(), choice.choice().choices().end()) ==
          std::vector<std::string>{"yes", "no", ""});
    CHECK(choice.source() == "structured_outputs.choice");
    const v1::OutputConstraint grammar =
        ConstraintOf(Parse(chat, {{"structured_outputs", {{"grammar", "root ::= \"a\""}}}}));
    CHECK(grammar.grammar() == "root ::= \"a\"");
    CHECK(grammar.source() == "structured_outputs.grammar");
    const v1::OutputConstraint object = ConstraintOf(Parse(chat, {{"structured_outputs", {{"json_object", true}}}}));
    CHECK(object.json_object());
    CHECK(object.source() == "structured_outputs.json_object");
  }
}

TEST_CASE("structured_output: the guided_* aliases", "[unit][openai]") {
  for (const bool chat : {true, false}) {
    INFO((chat ? "chat" : "completion"));
    const v1::OutputConstraint schema =
        ConstraintOf(ParseRaw(chat, std::string(R"("guided_json":)") + kUnsortedSchema));
    CHECK(schema.json_schema() == kUnsortedSchema);
    CHECK(schema.source() == "guided_json");
    CHECK(ConstraintOf(Parse(chat, {{"guided_json", "false"}})).json_schema() == "false");
    const v1::OutputConstraint regex = ConstraintOf(Parse(chat, {{"guided_regex", "a|b"}}));
    CHECK(regex.regex() == "a|b");
    CHECK(regex.source() == "guided_regex");
    const v1::OutputConstraint choice = ConstraintOf(Parse(chat, {{"guided_choice", {"x"}}}));
    REQUIRE(choice.choice().choices_size() == 1);
    CHECK(choice.choice().choices(0) == "x");
    CHECK(choice.source() == "guided_choice");
    const v1::OutputConstraint grammar = ConstraintOf(Parse(chat, {{"guided_grammar", "root ::= [a-z]+"}}));
    CHECK(grammar.grammar() == "root ::= [a-z]+");
    CHECK(grammar.source() == "guided_grammar");
  }
}

TEST_CASE("structured_output: two constraints are refused, naming both", "[unit][openai]") {
  const json json_object = {{"type", "json_object"}};
  for (const bool chat : {true, false}) {
    INFO((chat ? "chat" : "completion"));
    ExpectInvalid(Parse(chat, {{"response_format", json_object}, {"guided_regex", "a"}}), "guided_regex",
                  "'response_format' and 'guided_regex' both constrain the output");
    ExpectInvalid(Parse(chat, {{"response_format", json_object}, {"structured_outputs", {{"regex", "a"}}}}),
                  "structured_outputs.regex", "'response_format' and 'structured_outputs.regex'");
    ExpectInvalid(Parse(chat, {{"structured_outputs", {{"choice", {"a"}}}}, {"guided_json", json::object()}}),
                  "guided_json", "'structured_outputs.choice' and 'guided_json'");
    ExpectInvalid(Parse(chat, {{"guided_json", json::object()}, {"guided_grammar", "root ::= \"a\""}}),
                  "guided_grammar", "'guided_json' and 'guided_grammar'");
    ExpectInvalid(Parse(chat, {{"structured_outputs", {{"regex", "a"}, {"choice", {"a"}}}}}), "structured_outputs",
                  "only one constraint, got regex and choice");
    // A text response_format constrains nothing.
    CHECK(Parse(chat, {{"response_format", {{"type", "text"}}}, {"guided_regex", "a"}}).ok());
  }
}

TEST_CASE("structured_output: malformed response_format is refused by name", "[unit][openai]") {
  const json schema = {{"type", "object"}};
  const auto with_spec = [](const json& spec) {
    return json{{"response_format", {{"type", "json_schema"}, {"json_schema", spec}}}};
  };
  for (const bool chat : {true, false}) {
    INFO((chat ? "chat" : "completion"));
    ExpectInvalid(Parse(chat, {{"response_format", "json_object"}}), "response_format", "must be an object");
    ExpectInvalid(Parse(chat, {{"response_format", {{"type", "xml"}}}}), "response_format.type",
                  "response_format type \"xml\" is not supported");
    ExpectInvalid(Parse(chat, {{"response_format", {{"type", "structural_tag"}}}}), "response_format.type",
                  "\"structural_tag\"");
    ExpectInvalid(Parse(chat, {{"response_format", json::object()}}), "response_format.type", "is required");
    ExpectInvalid(Parse(chat, {{"response_format", {{"type", 1}}}}), "response_format.type", "must be a string");
    ExpectInvalid(Parse(chat, {{"response_format", {{"type", "text"}, {"json_schema", {{"name", "x"}}}}}}),
                  "response_format.json_schema", "a response_format of type 'text' takes only type");
    ExpectInvalid(Parse(chat, {{"response_format", {{"type", "json_schema"}}}}), "response_format.json_schema",
                  "is required");
    ExpectInvalid(Parse(chat, {{"response_format", {{"type", "json_schema"}, {"json_schema", "{}"}}}}),
                  "response_format.json_schema", "must be an object");
    ExpectInvalid(Parse(chat, with_spec({{"schema", schema}})), "response_format.json_schema.name", "is required");
    ExpectInvalid(Parse(chat, with_spec({{"name", "a b"}, {"schema", schema}})), "response_format.json_schema.name",
                  "1 to 64 characters");
    ExpectInvalid(Parse(chat, with_spec({{"name", ""}, {"schema", schema}})), "response_format.json_schema.name");
    ExpectInvalid(Parse(chat, with_spec({{"name", std::string(65, 'a')}, {"schema", schema}})),
                  "response_format.json_schema.name");
    CHECK(Parse(chat, with_spec({{"name", std::string(64, 'a')}, {"schema", schema}})).ok());
    ExpectInvalid(Parse(chat, with_spec({{"name", "x"}})), "response_format.json_schema.schema", "is required");
    ExpectInvalid(Parse(chat, with_spec({{"name", "x"}, {"schema", json::array()}})),
                  "response_format.json_schema.schema", "must be a JSON schema (an object or a boolean), not an array");
    // OpenAI takes the schema as JSON, not as a string holding it.
    ExpectInvalid(Parse(chat, with_spec({{"name", "x"}, {"schema", "{}"}})), "response_format.json_schema.schema",
                  "not a string");
    ExpectInvalid(Parse(chat, with_spec({{"name", "x"}, {"schema", schema}, {"strict", "yes"}})),
                  "response_format.json_schema.strict", "must be a boolean");
    ExpectInvalid(Parse(chat, with_spec({{"name", "x"}, {"schema", schema}, {"description", 1}})),
                  "response_format.json_schema.description", "must be a string");
    ExpectInvalid(Parse(chat, with_spec({{"name", "x"}, {"schema", schema}, {"format", "json"}})),
                  "response_format.json_schema.format", "is not supported by this server");
  }
}

TEST_CASE("structured_output: malformed structured_outputs and guided_* are refused by name", "[unit][openai]") {
  for (const bool chat : {true, false}) {
    INFO((chat ? "chat" : "completion"));
    ExpectInvalid(Parse(chat, {{"structured_outputs", "json"}}), "structured_outputs", "must be an object");
    ExpectInvalid(Parse(chat, {{"structured_outputs", json::object()}}), "structured_outputs", "sets no constraint");
    ExpectInvalid(Parse(chat, {{"structured_outputs", {{"json_object", false}}}}), "structured_outputs",
                  "sets no constraint");
    ExpectInvalid(Parse(chat, {{"structured_outputs", {{"regex", "a"}, {"disable_fallback", true}}}}),
                  "structured_outputs.disable_fallback",
                  "'structured_outputs.disable_fallback' is not supported by this server; 'structured_outputs' takes "
                  "only json, regex, choice, grammar, json_object");
    ExpectInvalid(Parse(chat, {{"structured_outputs", {{"regex", "a"}, {"whitespace_pattern", " "}}}}),
                  "structured_outputs.whitespace_pattern", "not supported");
    ExpectInvalid(Parse(chat, {{"structured_outputs", {{"json_object", 1}}}}), "structured_outputs.json_object",
                  "must be a boolean");
    ExpectInvalid(Parse(chat, {{"guided_decoding_backend", "xgrammar"}, {"guided_regex", "a"}}),
                  "guided_decoding_backend", "not supported");
    ExpectInvalid(Parse(chat, {{"guided_whitespace_pattern", " "}, {"guided_json", json::object()}}),
                  "guided_whitespace_pattern", "not supported");
    // Regexes and grammars: non-empty strings.
    ExpectInvalid(Parse(chat, {{"guided_regex", ""}}), "guided_regex", "must not be empty");
    ExpectInvalid(Parse(chat, {{"guided_regex", 5}}), "guided_regex", "must be a string");
    ExpectInvalid(Parse(chat, {{"structured_outputs", {{"grammar", ""}}}}), "structured_outputs.grammar",
                  "must not be empty");
    ExpectInvalid(Parse(chat, {{"guided_grammar", json::array()}}), "guided_grammar", "must be a string");
    // Choices: 1 to 1024 strings.
    ExpectInvalid(Parse(chat, {{"guided_choice", json::array()}}), "guided_choice", "at least one string");
    ExpectInvalid(Parse(chat, {{"guided_choice", "yes"}}), "guided_choice", "must be an array of strings");
    ExpectInvalid(Parse(chat, {{"structured_outputs", {{"choice", {"a", 1}}}}}), "structured_outputs.choice",
                  "entry 1 is a number");
    // Schemas: JSON, or for json and guided_json a string holding JSON.
    ExpectInvalid(Parse(chat, {{"guided_json", 5}}), "guided_json",
                  "a JSON schema (an object or a boolean) or a string holding one");
    ExpectInvalid(Parse(chat, {{"guided_json", "{\"type\": "}}), "guided_json", "not valid JSON");
    // The parser would stop at the NUL and take {"type":"object"}; JSON never holds a raw NUL.
    ExpectInvalid(Parse(chat, {{"guided_json", std::string("{\"type\":\"object\"}\0junk", 22)}}), "guided_json",
                  "NUL byte at offset 17");
    ExpectInvalid(Parse(chat, {{"structured_outputs", {{"json", "[1]"}}}}), "structured_outputs.json",
                  "not JSON of type array");
    ExpectInvalid(Parse(chat, {{"guided_json", std::string(100, '[') + std::string(100, ']')}}), "guided_json",
                  "nests JSON deeper than 64 levels");
  }
}

TEST_CASE("structured_output: sizes of constraints", "[unit][openai]") {
  const size_t limit = limits::kMaxConstraintTextBytes;
  CHECK(Chat({{"guided_regex", std::string(limit, 'a')}}).ok());
  ExpectInvalid(Chat({{"guided_regex", std::string(limit + 1, 'a')}}), "guided_regex",
                "is 262145 bytes; at most 262144 are allowed");
  ExpectInvalid(Completion({{"structured_outputs", {{"grammar", std::string(limit + 1, 'a')}}}}),
                "structured_outputs.grammar", "262145 bytes");
  // A schema is measured as compact JSON: {"description":"..."} is 18 bytes besides the text.
  const json big = {{"description", std::string(limit - 17, 'x')}};
  ExpectInvalid(Chat({{"guided_json", big}}), "guided_json", "262145 bytes as compact JSON");
  CHECK(Chat({{"guided_json", {{"description", std::string(limit - 18, 'x')}}}}).ok());
  ExpectInvalid(Chat({{"guided_json", big.dump()}}), "guided_json", "262145 bytes");
  ExpectInvalid(
      Chat({{"response_format", {{"type", "json_schema"}, {"json_schema", {{"name", "big"}, {"schema", big}}}}}}),
      "response_format.json_schema.schema", "as compact JSON");

  json choices = json::array();
  for (int64_t i = 0; i < limits::kMaxChoiceStrings; ++i) choices.push_back(std::to_string(i));
  CHECK(Chat({{"guided_choice", choices}}).ok());
  choices.push_back("one more");
  ExpectInvalid(Chat({{"guided_choice", choices}}), "guided_choice", "at most 1024 strings, got 1025");
  CHECK(Chat({{"guided_choice", {std::string(limits::kMaxChoiceStringBytes, 'c')}}}).ok());
  ExpectInvalid(Chat({{"guided_choice", {"a", std::string(limits::kMaxChoiceStringBytes + 1, 'c')}}}), "guided_choice",
                "entry 1 of 'guided_choice' is 4097 bytes; at most 4096");
}

TEST_CASE("structured_output: logit_bias", "[unit][openai]") {
  for (const bool chat : {true, false}) {
    INFO((chat ? "chat" : "completion"));
    const absl::StatusOr<OpenAiRequest> request =
        Parse(chat, {{"logit_bias", {{"50256", -100}, {"7", 100}, {"0", 2.5}, {"2147483647", 0}}}});
    REQUIRE(request.ok());
    const auto& bias = request->generate.sampling().logit_bias();
    REQUIRE(bias.size() == 4);
    CHECK(bias.at(50256) == -100);
    CHECK(bias.at(7) == 100);
    CHECK(bias.at(0) == 2.5);
    CHECK(bias.at(2147483647) == 0);
    CHECK_FALSE(request->generate.sampling().has_constraint());
    const absl::StatusOr<OpenAiRequest> empty = Parse(chat, {{"logit_bias", json::object()}});
    REQUIRE(empty.ok());
    CHECK(empty->generate.sampling().logit_bias().empty());

    for (const std::string key : {"abc", "-1", "+1", "1.5", " 1", "2147483648", "99999999999999999999999", ""}) {
      INFO("key " << key);
      ExpectInvalid(Parse(chat, {{"logit_bias", {{key, 1}}}}), "logit_bias",
                    "'logit_bias' key \"" + key + "\" is not a token id");
    }
    ExpectInvalid(Parse(chat, {{"logit_bias", {{"5", 100.5}}}}), "logit_bias",
                  "value for token \"5\" must be in [-100, 100], got 100.5");
    ExpectInvalid(Parse(chat, {{"logit_bias", {{"5", -101}}}}), "logit_bias", "in [-100, 100]");
    ExpectInvalid(Parse(chat, {{"logit_bias", {{"5", "1"}}}}), "logit_bias",
                  "value for token \"5\" must be a number, not a string");
    ExpectInvalid(Parse(chat, {{"logit_bias", {{"7", 1}, {"07", 2}}}}), "logit_bias", "names token 7 more than once");
    ExpectInvalid(Parse(chat, {{"logit_bias", {1, 2}}}), "logit_bias", "must be an object");
  }
  json bias = json::object();
  for (int i = 0; i < limits::kMaxLogitBiasEntries; ++i) bias[std::to_string(i)] = 1;
  CHECK(Chat({{"logit_bias", bias}}).ok());
  bias["300"] = 1;
  ExpectInvalid(Chat({{"logit_bias", bias}}), "logit_bias", "at most 300 entries, got 301");
}

TEST_CASE("structured_output: allowed_token_ids and bad_words", "[unit][openai]") {
  for (const bool chat : {true, false}) {
    INFO((chat ? "chat" : "completion"));
    const absl::StatusOr<OpenAiRequest> request =
        Parse(chat, {{"allowed_token_ids", {5, 0, 2147483647}}, {"bad_words", {"darn", " heck"}}});
    REQUIRE(request.ok());
    const v1::SamplingParams& s = request->generate.sampling();
    CHECK(std::vector<int32_t>(s.allowed_token_ids().begin(), s.allowed_token_ids().end()) ==
          std::vector<int32_t>{5, 0, 2147483647});
    CHECK(std::vector<std::string>(s.bad_words().begin(), s.bad_words().end()) ==
          std::vector<std::string>{"darn", " heck"});
    const absl::StatusOr<OpenAiRequest> no_words = Parse(chat, {{"bad_words", json::array()}});
    REQUIRE(no_words.ok());
    CHECK(no_words->generate.sampling().bad_words().empty());

    ExpectInvalid(Parse(chat, {{"allowed_token_ids", json::array()}}), "allowed_token_ids", "is empty");
    ExpectInvalid(Parse(chat, {{"allowed_token_ids", {1, -1}}}), "allowed_token_ids", "not a token id");
    ExpectInvalid(Parse(chat, {{"allowed_token_ids", {1, 2147483648LL}}}), "allowed_token_ids", "not a token id");
    ExpectInvalid(Parse(chat, {{"allowed_token_ids", {"1"}}}), "allowed_token_ids", "only token ids");
    ExpectInvalid(Parse(chat, {{"allowed_token_ids", 5}}), "allowed_token_ids", "must be an array of token ids");
    ExpectInvalid(Parse(chat, {{"bad_words", "darn"}}), "bad_words", "must be an array of strings");
    ExpectInvalid(Parse(chat, {{"bad_words", {"a", ""}}}), "bad_words", "entry 1 of 'bad_words' is empty");
    ExpectInvalid(Parse(chat, {{"bad_words", {"a", 2}}}), "bad_words", "entry 1 is a number");
  }
  CHECK(Chat({{"bad_words", {std::string(limits::kMaxBadWordBytes, 'w')}}}).ok());
  ExpectInvalid(Chat({{"bad_words", {std::string(limits::kMaxBadWordBytes + 1, 'w')}}}), "bad_words",
                "entry 0 of 'bad_words' is 1025 bytes; at most 1024");
  json words = json::array();
  for (int64_t i = 0; i < limits::kMaxBadWords; ++i) words.push_back("w" + std::to_string(i));
  CHECK(Chat({{"bad_words", words}}).ok());
  words.push_back("more");
  ExpectInvalid(Chat({{"bad_words", words}}), "bad_words", "at most 1024 words, got 1025");
  json ids = json::array();
  for (int64_t i = 0; i < limits::kMaxAllowedTokenIds; ++i) ids.push_back(i);
  CHECK(Completion({{"allowed_token_ids", ids}}).ok());
  ids.push_back(0);
  ExpectInvalid(Completion({{"allowed_token_ids", ids}}), "allowed_token_ids", "at most 262144 ids, got 262145");
}

TEST_CASE("structured_output: nothing of it goes with beam search", "[unit][openai]") {
  const json beams = {{"use_beam_search", true}, {"best_of", 2}};
  const auto with_beams = [&beams](const json& extra) {
    json body = beams;
    for (const auto& [key, value] : extra.items()) body[key] = value;
    return body;
  };
  for (const bool chat : {true, false}) {
    INFO((chat ? "chat" : "completion"));
    ExpectInvalid(Parse(chat, with_beams({{"response_format", {{"type", "json_object"}}}})), "response_format",
                  "structured outputs are not available with use_beam_search");
    ExpectInvalid(Parse(chat, with_beams({{"guided_regex", "a"}})), "guided_regex",
                  "structured outputs are not available with use_beam_search");
    ExpectInvalid(Parse(chat, with_beams({{"structured_outputs", {{"choice", {"a"}}}}})), "structured_outputs.choice",
                  "structured outputs are not available with use_beam_search");
    ExpectInvalid(Parse(chat, with_beams({{"logit_bias", {{"1", 1}}}})), "logit_bias",
                  "'logit_bias' is not available with 'use_beam_search': true");
    ExpectInvalid(Parse(chat, with_beams({{"allowed_token_ids", {1}}})), "allowed_token_ids", "use_beam_search");
    ExpectInvalid(Parse(chat, with_beams({{"bad_words", {"a"}}})), "bad_words", "use_beam_search");
    // Nothing set is nothing to refuse.
    CHECK(Parse(chat, with_beams({{"response_format", {{"type", "text"}}},
                                  {"logit_bias", json::object()},
                                  {"bad_words", json::array()}}))
              .ok());
  }
}

TEST_CASE("structured_output: every prompt of a completions list carries the restrictions", "[unit][openai]") {
  const std::string fields = std::string(R"("prompt":["a","b","c"],"guided_json":)") + kUnsortedSchema +
                             R"(,"logit_bias":{"9":-5},"allowed_token_ids":[1,2],"bad_words":["x"])";
  const absl::StatusOr<OpenAiRequest> request = ParseCompletionRequest(R"({"model":"qwen",)" + fields + "}");
  REQUIRE(request.ok());
  REQUIRE(request->num_prompts() == 3);
  std::vector<const v1::GenerateRequest*> all = {&request->generate};
  for (const v1::GenerateRequest& further : request->further_prompts) all.push_back(&further);
  for (const v1::GenerateRequest* generate : all) {
    const v1::SamplingParams& s = generate->sampling();
    CHECK(s.constraint().json_schema() == kUnsortedSchema);
    CHECK(s.constraint().source() == "guided_json");
    REQUIRE(s.logit_bias().size() == 1);
    CHECK(s.logit_bias().at(9) == -5);
    CHECK(s.allowed_token_ids_size() == 2);
    REQUIRE(s.bad_words_size() == 1);
    CHECK(s.bad_words(0) == "x");
  }
  CHECK(request->further_prompts[1].prompt() == "c");
}

// Found in review: each prompt of a list carries its own copy of the restrictions, so a 3 MB body could hold
// hundreds of MB in the gateway. Their total is bounded.
TEST_CASE("structured_output: a prompt list times its restrictions is bounded", "[unit][openai]") {
  json ids = json::array();
  for (int i = 0; i < 200000; ++i) ids.push_back(i);
  json prompts = json::array();
  for (int i = 0; i < 32; ++i) prompts.push_back("p" + std::to_string(i));
  json body = {{"model", "qwen"}, {"prompt", prompts}, {"allowed_token_ids", ids}};
  absl::StatusOr<OpenAiRequest> refused = ParseCompletionRequest(body.dump());
  REQUIRE_FALSE(refused.ok());
  CHECK(ParameterOf(refused.status()) == "prompt");
  CHECK_THAT(std::string(refused.status().message()), Catch::Contains("bytes in all"));
  body["prompt"] = json::array({"one", "two"});
  CHECK(ParseCompletionRequest(body.dump()).ok());
}

}  // namespace
}  // namespace llmc::gateway
