// Unit tests: the /tokenize and /detokenize bodies (vLLM's shapes) and the router's prefix routes.
#include "gateway/openai/tokenize_request.h"

#include <string>

#include "gateway/http/http_router.h"
#include "gateway/openai/openai_error.h"
#include "tests/support/catch.h"

namespace llmc::gateway {
namespace {

TEST_CASE("tokenize request: a text prompt, with add_special_tokens when given", "[unit][gateway]") {
  absl::StatusOr<v1::TokenizeRequest> request = ParseTokenizeRequest(R"({"model": "m", "prompt": "Hi there"})");
  REQUIRE(request.ok());
  CHECK(request->model() == "m");
  CHECK(request->text() == "Hi there");
  CHECK_FALSE(request->has_add_special_tokens());
  request = ParseTokenizeRequest(R"({"prompt": "Hi", "add_special_tokens": false})");
  REQUIRE(request.ok());
  CHECK(request->model().empty());
  REQUIRE(request->has_add_special_tokens());
  CHECK_FALSE(request->add_special_tokens());
}

TEST_CASE("tokenize request: messages become the chat input a template renders", "[unit][gateway]") {
  const absl::StatusOr<v1::TokenizeRequest> request = ParseTokenizeRequest(
      R"({"model": "m", "messages": [{"role": "developer", "content": "Be brief"}, {"content": "Hi", "role": "user"}],
          "add_generation_prompt": false, "chat_template_kwargs": {"enable_thinking": false}})");
  REQUIRE(request.ok());
  REQUIRE(request->has_chat());
  // The client's key order is kept; developer reads as system.
  CHECK(request->chat().messages_json() ==
        R"([{"role":"system","content":"Be brief"},{"content":"Hi","role":"user"}])");
  CHECK_FALSE(request->chat().add_generation_prompt());
  CHECK(request->chat().chat_template_kwargs_json() == R"({"enable_thinking":false})");
}

TEST_CASE("tokenize request: bad bodies name the field", "[unit][gateway]") {
  const auto param_of = [](const char* body) {
    const absl::StatusOr<v1::TokenizeRequest> request = ParseTokenizeRequest(body);
    REQUIRE_FALSE(request.ok());
    CHECK(request.status().code() == absl::StatusCode::kInvalidArgument);
    return ParameterOf(request.status());
  };
  CHECK(param_of(R"({"model": "m"})") == "prompt");
  CHECK(param_of(R"({"prompt": "a", "messages": []})") == "messages");
  CHECK(param_of(R"({"prompt": ["a"]})") == "prompt");
  CHECK(param_of(R"({"model": 3, "prompt": "a"})") == "model");
  CHECK(param_of(R"({"messages": []})") == "messages");
  CHECK(param_of(R"({"messages": [{"role": "user", "content": "x"}], "continue_final_message": true})") ==
        "continue_final_message");
  CHECK(param_of(R"({"prompt": "a", "add_special_tokens": "yes"})") == "add_special_tokens");
  CHECK_FALSE(ParseTokenizeRequest("[1, 2]").ok());
  CHECK_FALSE(ParseTokenizeRequest("{\"prompt\": \"\xff\"}").ok());
}

TEST_CASE("detokenize request: token ids, none, or a clear refusal", "[unit][gateway]") {
  absl::StatusOr<v1::DetokenizeRequest> request = ParseDetokenizeRequest(R"({"model": "m", "tokens": [1, 2, 3]})");
  REQUIRE(request.ok());
  CHECK(request->token_ids_size() == 3);
  CHECK_FALSE(request->skip_special_tokens());  // as vLLM: everything given is decoded
  request = ParseDetokenizeRequest(R"({"tokens": []})");
  REQUIRE(request.ok());
  CHECK(request->token_ids_size() == 0);
  for (const char* body : {R"({})", R"({"tokens": [1.5]})", R"({"tokens": [-1]})", R"({"tokens": [4294967296]})",
                           R"({"tokens": "1 2"})", R"({"tokens": [[1]]})"}) {
    INFO(body);
    request = ParseDetokenizeRequest(body);
    REQUIRE_FALSE(request.ok());
    CHECK(ParameterOf(request.status()) == "tokens");
  }
}

TEST_CASE("tokenize response: vLLM's field names", "[unit][gateway]") {
  v1::TokenizeResponse response;
  response.add_token_ids(5);
  response.add_token_ids(7);
  response.set_count(2);
  response.set_max_context_length(4096);
  CHECK(TokenizeResponseJson(response) == R"({"count":2,"max_model_len":4096,"tokens":[5,7],"token_strs":null})");
  v1::DetokenizeResponse text;
  text.set_text("a \"quoted\" word");
  CHECK(DetokenizeResponseJson(text) == R"({"prompt":"a \"quoted\" word"})");
}

TEST_CASE("http router: a prefix route matches longer paths, exact paths win, the rest is percent-decoded",
          "[unit][gateway]") {
  HttpRouter router({}, {});
  router.Add("GET", "/v1/models", nullptr, true);
  router.Add("GET", "/v1/models/*", nullptr, true);
  HttpRouter::Lookup lookup = router.Find("GET", "/v1/models");
  CHECK(lookup.match == HttpRouter::Match::kFound);
  CHECK(lookup.route_path == "/v1/models");
  lookup = router.Find("GET", "/v1/models/Qwen%2FQwen3-0.6B?x=1");
  REQUIRE(lookup.match == HttpRouter::Match::kFound);
  CHECK(lookup.route_path == "/v1/models/*");
  CHECK(HttpRouter::Remainder(lookup.route_path, "/v1/models/Qwen%2FQwen3-0.6B?x=1") == "Qwen/Qwen3-0.6B");
  CHECK(HttpRouter::Remainder(lookup.route_path, "/v1/models/a/b%zz%4") == "a/b%zz%4");
  CHECK(router.Find("POST", "/v1/models/x").match == HttpRouter::Match::kMethodNotAllowed);
  CHECK(router.Find("GET", "/v1/models/").match == HttpRouter::Match::kNotFound);  // nothing after the prefix
  CHECK(router.Find("GET", "/v1/modelsx").match == HttpRouter::Match::kNotFound);
  CHECK(router.HasPath("/v1/models/abc"));
}

}  // namespace
}  // namespace llmc::gateway
