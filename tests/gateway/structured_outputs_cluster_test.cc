// Integration tests: structured outputs and token restrictions through the real llmc-gateway, llmc-controller
// and llmc-worker (the small random-weight model with the real Qwen3 vocabulary), all on free loopback ports.
// The model cannot follow instructions, so every check is a property that holds for any weights: whatever
// finishes is in the constraint's language, refusals are 400s in the OpenAI envelope, masks hold.
//
// Clients: tests/python/structured_outputs_client.py (the whole JSON Schema corpus against python3-jsonschema,
// regex, choice, GBNF, streaming), tests/gateway/openai_sdk_structured.mjs (the OpenAI Node SDK with zod), and
// HTTP requests from here (errors, logit_bias, allowed_token_ids, bad_words).
#include <algorithm>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "tests/support/catch.h"
#include "tests/support/child_process.h"
#include "tests/support/cluster_http.h"
#include "tests/support/http_client.h"
#include "tests/support/small_cluster.h"
#include "tests/support/small_model.h"

namespace llmc::testing {
namespace {

using nlohmann::json;

constexpr char kCompletionsPath[] = "/v1/completions";

// The cluster every test here starts.
class StructuredOutputsCluster : public SmallCluster {
 public:
  // The package's Qwen3 template makes it a reasoning model, whose constraints would apply after an optional
  // <think> block (tool_calling_cluster_test.cc checks that); here the constraint is the whole answer.
  explicit StructuredOutputsCluster(std::vector<std::string> gateway_flags = {})
      : SmallCluster("structured-worker", {"--reasoning_parser=none"}, std::move(gateway_flags)) {}
};

json UnconstrainedChat(int max_tokens, const std::string& content = "Tell me about the sea.") {
  return {{"model", kSmallModelName},
          {"messages", json::array({{{"role", "user"}, {"content", content}}})},
          {"max_tokens", max_tokens},
          {"temperature", 0}};
}

json PostStructuredOk(int port, const std::string& path, const json& body) {
  const HttpReply reply = PostJson(port, path, body.dump());
  INFO(path << " " << body.dump().substr(0, 400) << " -> " << reply.status << " " << reply.error << " "
            << reply.body.substr(0, 800));
  REQUIRE(reply.status == 200);
  return ParseJson(reply.body);
}

// A short unconstrained request succeeds: the cluster still serves.
void ExpectServing(int port) {
  const json answer = PostStructuredOk(port, kChatPath, UnconstrainedChat(2));
  REQUIRE(answer["choices"].size() == 1);
  CHECK(answer["choices"][0]["message"]["content"].is_string());
}

// `body` is refused with `status` in the OpenAI error envelope whose message holds every one of `words`;
// `param` is checked when not empty. With `streamed_too`, the same body with stream: true is refused the same
// way, before any event. Then the cluster still serves.
void ExpectRefused(int port, const std::string& path, const json& body, int status,
                   const std::vector<std::string>& words, const std::string& param = "", bool streamed_too = true) {
  for (const bool stream : {false, true}) {
    if (stream && !streamed_too) continue;
    json sent = body;
    sent["stream"] = stream;
    const HttpReply reply = PostJson(port, path, sent.dump());
    INFO(path << " " << sent.dump().substr(0, 400) << " -> " << reply.status << " " << reply.error << " "
              << reply.body);
    CHECK(reply.status == status);
    CHECK_THAT(reply.Header("Content-Type"), Catch::StartsWith("application/json"));
    const json envelope = ParseJson(reply.body);
    REQUIRE(envelope.contains("error"));
    const json& error = envelope["error"];
    REQUIRE(error["message"].is_string());
    CHECK(error["type"] == "invalid_request_error");
    CHECK(error.contains("param"));
    CHECK(error.contains("code"));
    for (const std::string& word : words) CHECK_THAT(error["message"].get<std::string>(), Catch::Contains(word));
    if (!param.empty()) CHECK(error["param"] == param);
  }
  ExpectServing(port);
}

// The ids of a choice's generated tokens, from logprobs with return_tokens_as_token_ids (chat's
// logprobs.content[i].token, or completions' logprobs.tokens[i]).
std::vector<int> TokenIds(const json& choice) {
  std::vector<int> ids;
  INFO(choice.dump());
  REQUIRE(choice["logprobs"].is_object());
  const json& logprobs = choice["logprobs"];
  std::vector<std::string> tokens;
  if (logprobs.contains("content")) {
    for (const json& entry : logprobs["content"]) tokens.push_back(entry["token"].get<std::string>());
  } else {
    tokens = logprobs["tokens"].get<std::vector<std::string>>();
  }
  for (const std::string& token : tokens) {
    REQUIRE(token.rfind("token_id:", 0) == 0);
    ids.push_back(std::stoi(token.substr(9)));
  }
  return ids;
}

std::vector<int> Tokenize(int port, const std::string& text) {
  const json answer = PostStructuredOk(port, "/tokenize",
                                       {{"model", kSmallModelName}, {"prompt", text}, {"add_special_tokens", false}});
  return answer["tokens"].get<std::vector<int>>();
}

std::string Detokenize(int port, const std::vector<int>& ids) {
  return PostStructuredOk(port, "/detokenize", {{"model", kSmallModelName}, {"tokens", ids}})["prompt"]
      .get<std::string>();
}

bool ContainsRun(const std::vector<int>& ids, const std::vector<int>& run) {
  return !run.empty() && std::search(ids.begin(), ids.end(), run.begin(), run.end()) != ids.end();
}

// Runs tests/python/structured_outputs_client.py with `part` against the cluster's gateway. Under a sanitizer
// the worker is many times slower: one shorter answer for every eighth schema of the corpus, and every fourth
// of the streaming checks, then (the normal build covers them all; the sanitizers look for memory errors and
// races on the same paths).
void RunPythonClient(StructuredOutputsCluster& cluster, const std::string& part) {
  std::vector<std::string> args = {std::string(LLMC_SOURCE_DIR) + "/tests/python/structured_outputs_client.py",
                                   "--base-url",
                                   cluster.gateway().base_url(),
                                   "--model",
                                   kSmallModelName,
                                   "--part",
                                   part};
  if (kSanitized && part == "corpus") args.insert(args.end(), {"--n", "1", "--max-tokens", "48", "--every", "8"});
  if (kSanitized && part != "corpus") args.insert(args.end(), {"--n", "1", "--max-tokens", "64", "--every", "4"});
  // The whole corpus took 96-112 s on a 2.6 GHz Ice Lake Xeon (2026-12-01), whose bfloat16 kernels are AVX2's: the
  // bound leaves room for slower machines and busy neighbours (ctest's own limit is 300 s).
  const CommandResult result = RunCommand(LLMC_PYTHON, args, absl::Seconds(280));
  INFO("python output:\n" << result.output);
  INFO(cluster.Logs());
  CHECK(result.exit_code == 0);
  CHECK_THAT(result.output, Catch::Contains("all checks passed"));
}

TEST_CASE("structured outputs e2e: every schema of the corpus, its finished answers valid under python3-jsonschema",
          "[integration][gateway][grammar]") {
  // Each schema as response_format json_schema, two sampled answers each: every answer that finished
  // validates (draft 2020-12, formats asserted), and the schemas llmc refuses are 400s naming the keyword.
  StructuredOutputsCluster cluster;
  RunPythonClient(cluster, "corpus");
  ExpectServing(cluster.port());
}

TEST_CASE("structured outputs e2e: regex, choice, GBNF, streaming and completions through the gateway",
          "[integration][gateway][grammar]") {
  // Greedy answers equal streamed and not; structured_outputs.regex against re.fullmatch; guided_choice;
  // GBNF grammars against re and a hand-written parser; structured_outputs.json, guided_json as a string,
  // json_object; response_format on /v1/completions.
  StructuredOutputsCluster cluster;
  RunPythonClient(cluster, "features");
}

TEST_CASE("structured outputs e2e: the OpenAI Node SDK's parse() with zod, json_object and BadRequestError",
          "[integration][gateway][grammar]") {
  const std::string api_key = "sk-llmc-structured";
  StructuredOutputsCluster cluster({"--api_keys=" + api_key});
  const CommandResult result = RunCommand(
      "/usr/bin/env",
      {"node", std::string(LLMC_SOURCE_DIR) + "/tests/gateway/openai_sdk_structured.mjs",
       std::string(LLMC_TOKENIZER_MODULES) + "/node_modules", cluster.gateway().base_url(), kSmallModelName, api_key},
      absl::Seconds(90));
  INFO("node output:\n" << result.output << "\n(openai and zod come from scripts/fetch-tokenizers.sh)");
  INFO(cluster.Logs());
  CHECK(result.exit_code == 0);
  CHECK_THAT(result.output, Catch::Contains("all steps passed"));
}

TEST_CASE("structured outputs e2e: bad constraints and restrictions are 400s, and the cluster keeps serving",
          "[integration][gateway][grammar]") {
  StructuredOutputsCluster cluster;
  const int port = cluster.port();
  auto with = [](json body, const json& fields) {
    body.update(fields);
    return body;
  };
  const json chat = UnconstrainedChat(4);

  {
    INFO("regexes the worker cannot compile");
    ExpectRefused(port, kChatPath, with(chat, {{"structured_outputs", {{"regex", "(abc"}}}}), 400,
                  {"structured_outputs.regex", "missing )"});
    ExpectRefused(port, kChatPath, with(chat, {{"guided_regex", "(?=a)b"}}), 400, {"guided_regex", "lookahead"});
    ExpectRefused(port, kCompletionsPath,
                  {{"model", kSmallModelName}, {"prompt", "x"}, {"max_tokens", 4}, {"guided_regex", "a{2,1}"}}, 400,
                  {"guided_regex"});
  }
  {
    INFO("GBNF grammars with syntax errors or undefined rules");
    ExpectRefused(port, kChatPath, with(chat, {{"structured_outputs", {{"grammar", "root ::= \"abc"}}}}), 400,
                  {"structured_outputs.grammar", "GBNF line 1"});
    ExpectRefused(port, kChatPath, with(chat, {{"guided_grammar", "root ::= (\"a\" | \"b\"\n"}}), 400,
                  {"guided_grammar", "GBNF"});
    ExpectRefused(port, kChatPath, with(chat, {{"guided_grammar", "root ::= item\n"}}), 400,
                  {"guided_grammar", "undefined rule 'item'"});
  }
  {
    INFO("a JSON schema given as a string that is not JSON");
    ExpectRefused(port, kChatPath, with(chat, {{"guided_json", "{\"type\": \"object\""}}), 400,
                  {"guided_json", "not valid JSON"}, "guided_json");
    ExpectRefused(port, kChatPath, with(chat, {{"structured_outputs", {{"json", "{type: object}"}}}}), 400,
                  {"structured_outputs.json", "not valid JSON"}, "structured_outputs.json");
  }
  {
    INFO("schema keywords the worker cannot enforce name the keyword");
    const json schema = {{"type", "array"}, {"items", {{"type", "integer"}}}, {"uniqueItems", true}};
    ExpectRefused(port, kChatPath,
                  with(chat, {{"response_format",
                               {{"type", "json_schema"}, {"json_schema", {{"name", "u"}, {"schema", schema}}}}}}),
                  400, {"response_format", "uniqueItems"});
    ExpectRefused(port, kCompletionsPath,
                  {{"model", kSmallModelName},
                   {"prompt", "x"},
                   {"max_tokens", 4},
                   {"guided_json", {{"type", "string"}, {"format", "color"}}}},
                  400, {"guided_json", "format"});
  }
  {
    INFO("token ids beyond the vocabulary");
    ExpectRefused(port, kChatPath, with(chat, {{"logit_bias", {{"999999", 5}}}}), 400,
                  {"logit_bias", "999999", "outside the vocabulary"});
    ExpectRefused(port, kCompletionsPath,
                  {{"model", kSmallModelName}, {"prompt", "x"}, {"max_tokens", 4}, {"logit_bias", {{"151936", -5}}}},
                  400, {"logit_bias", "151936"});
    ExpectRefused(port, kChatPath, with(chat, {{"allowed_token_ids", {1, 2, 1000000}}}), 400,
                  {"allowed_token_ids", "1000000"});
  }
  {
    INFO("two constraints at once");
    ExpectRefused(port, kChatPath, with(chat, {{"guided_regex", "a+"}, {"guided_choice", {"a", "b"}}}), 400,
                  {"guided_regex", "guided_choice"}, "guided_choice");
    ExpectRefused(
        port, kChatPath,
        with(chat, {{"response_format", {{"type", "json_object"}}}, {"structured_outputs", {{"regex", "a"}}}}), 400,
        {"response_format", "structured_outputs.regex"}, "structured_outputs.regex");
    ExpectRefused(port, kChatPath, with(chat, {{"structured_outputs", {{"regex", "a"}, {"choice", {"a"}}}}}), 400,
                  {"regex", "choice"}, "structured_outputs");
  }
  {
    INFO("constraints and restrictions with beam search");
    // (Streamed, beam search is refused for stream: true first.)
    const json beam = with(chat, {{"use_beam_search", true}, {"best_of", 2}});
    ExpectRefused(port, kChatPath, with(beam, {{"guided_regex", "a+"}}), 400, {"use_beam_search"}, "guided_regex",
                  false);
    ExpectRefused(port, kChatPath, with(beam, {{"response_format", {{"type", "json_object"}}}}), 400,
                  {"use_beam_search"}, "response_format", false);
    ExpectRefused(port, kCompletionsPath,
                  {{"model", kSmallModelName},
                   {"prompt", "x"},
                   {"max_tokens", 4},
                   {"use_beam_search", true},
                   {"best_of", 2},
                   {"structured_outputs", {{"choice", {"a", "b"}}}}},
                  400, {"use_beam_search"}, "structured_outputs.choice", false);
    ExpectRefused(port, kChatPath, with(beam, {{"logit_bias", {{"9707", 1}}}}), 400, {"use_beam_search"}, "logit_bias",
                  false);
    ExpectRefused(port, kChatPath, with(beam, {{"bad_words", {"sea"}}}), 400, {"use_beam_search"}, "bad_words", false);
  }
  // After all of them, a constrained request still works.
  const json answer =
      PostStructuredOk(port, kChatPath, with(UnconstrainedChat(16), {{"guided_choice", {"yes", "no"}}}));
  const std::string content = answer["choices"][0]["message"]["content"].get<std::string>();
  INFO(content);
  CHECK(answer["choices"][0]["finish_reason"] == "stop");
  CHECK((content == "yes" || content == "no"));
}

TEST_CASE("structured outputs e2e: logit_bias forces a token, allowed_token_ids and bad_words restrict the output",
          "[integration][gateway][grammar]") {
  StructuredOutputsCluster cluster;
  const int port = cluster.port();
  // Sampled (temperature 1), to EOS-free lengths, with each token's id in logprobs.
  auto sampled = [](json body, int n, int max_tokens) {
    body.update({{"n", n},
                 {"max_tokens", max_tokens},
                 {"temperature", 1},
                 {"seed", 11},
                 {"ignore_eos", true},
                 {"logprobs", true},
                 {"return_tokens_as_token_ids", true}});
    return body;
  };

  {
    INFO("logit_bias +100 makes every sampled token that token, in chat and completions");
    const int token = Tokenize(port, "Hello").at(0);
    const std::string text = Detokenize(port, {token});
    for (const bool completions : {false, true}) {
      json body = completions ? json{{"model", kSmallModelName}, {"prompt", "Once upon a time"}} : UnconstrainedChat(0);
      body["logit_bias"] = {{std::to_string(token), 100}};
      body = sampled(body, 3, 6);
      if (completions) body["logprobs"] = 0;
      const json answer = PostStructuredOk(port, completions ? kCompletionsPath : kChatPath, body);
      REQUIRE(answer["choices"].size() == 3);
      for (const json& choice : answer["choices"]) {
        INFO(choice.dump());
        CHECK(TokenIds(choice) == std::vector<int>(6, token));
        std::string repeated;
        for (int i = 0; i < 6; ++i) repeated += text;
        CHECK((completions ? choice["text"] : choice["message"]["content"]) == repeated);
        CHECK(choice["finish_reason"] == "length");
      }
    }
  }

  {
    INFO("logit_bias -100 keeps a token out of greedy output");
    json greedy = UnconstrainedChat(12);
    greedy.update({{"ignore_eos", true}, {"logprobs", true}, {"return_tokens_as_token_ids", true}});
    const std::vector<int> before = TokenIds(PostStructuredOk(port, kChatPath, greedy)["choices"][0]);
    REQUIRE(before.size() == 12);
    greedy["logit_bias"] = {{std::to_string(before[0]), -100}};
    const std::vector<int> after = TokenIds(PostStructuredOk(port, kChatPath, greedy)["choices"][0]);
    REQUIRE(after.size() == 12);
    CHECK(std::find(after.begin(), after.end(), before[0]) == after.end());
  }

  {
    INFO("allowed_token_ids: every sampled token is one of them");
    const std::vector<int> allowed = Tokenize(port, " red green blue yellow");
    REQUIRE(allowed.size() == 4);
    json body = UnconstrainedChat(0);
    body["allowed_token_ids"] = allowed;
    const json answer = PostStructuredOk(port, kChatPath, sampled(body, 3, 10));
    for (const json& choice : answer["choices"]) {
      INFO(choice.dump());
      const std::vector<int> ids = TokenIds(choice);
      CHECK(ids.size() == 10);
      for (const int id : ids) CHECK(std::find(allowed.begin(), allowed.end(), id) != allowed.end());
    }
  }

  {
    INFO("bad_words: a word of the greedy answer never appears once banned, greedy or sampled");
    json greedy = UnconstrainedChat(24);
    greedy.update({{"ignore_eos", true}, {"logprobs", true}, {"return_tokens_as_token_ids", true}});
    const std::vector<int> before = TokenIds(PostStructuredOk(port, kChatPath, greedy)["choices"][0]);
    // A generated token that is a word on its own (with or without a leading space).
    const std::regex word_token(" ?[A-Za-z]{2,}");
    std::string word;
    std::vector<std::vector<int>> banned;
    for (const int id : before) {
      const std::string text = Detokenize(port, {id});
      if (!std::regex_match(text, word_token)) continue;
      const std::string bare = text[0] == ' ' ? text.substr(1) : text;
      const std::vector<int> plain = Tokenize(port, bare), spaced = Tokenize(port, " " + bare);
      if (plain != std::vector<int>{id} && spaced != std::vector<int>{id}) continue;
      word = bare;
      banned = {plain, spaced};
      break;
    }
    INFO("greedy tokens: " << json(before).dump());
    REQUIRE(!word.empty());
    INFO("banned word: " << word);
    greedy["bad_words"] = {word};
    const json answer = PostStructuredOk(port, kChatPath, greedy);
    const std::vector<int> after = TokenIds(answer["choices"][0]);
    CHECK(after.size() == 24);
    CHECK(after != before);
    for (const auto& run : banned) CHECK(!ContainsRun(after, run));

    json body = UnconstrainedChat(0);
    body["bad_words"] = {word, "the", "sea"};
    for (const char* other : {"the", " the", "sea", " sea"}) banned.push_back(Tokenize(port, other));
    const json sampled_answer = PostStructuredOk(port, kChatPath, sampled(body, 4, 24));
    for (const json& choice : sampled_answer["choices"]) {
      const std::vector<int> ids = TokenIds(choice);
      INFO(json(ids).dump());
      CHECK(ids.size() == 24);
      for (const auto& run : banned) CHECK(!ContainsRun(ids, run));
    }
  }
  ExpectServing(port);
}

}  // namespace
}  // namespace llmc::testing
