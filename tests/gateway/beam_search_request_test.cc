// vLLM's beam search parameters on /v1/completions and /v1/chat/completions: what reaches SamplingParams, and
// every refusal naming its parameter.
#include <string>

#include "gateway/openai/openai_request.h"
#include "nlohmann/json.hpp"
#include "tests/gateway/openai_request_parsing.h"
#include "tests/support/catch.h"

namespace llmc::gateway {
namespace {

using nlohmann::json;

TEST_CASE("openai_request: use_beam_search sets the beam width, greedy, and keeps n", "[unit][openai]") {
  for (const bool chat : {true, false}) {
    INFO((chat ? "chat" : "completion"));
    const auto parse = [chat](const json& extra) { return chat ? Chat(extra) : Completion(extra); };
    absl::StatusOr<OpenAiRequest> request = parse({{"use_beam_search", true},
                                                   {"n", 2},
                                                   {"best_of", 4},
                                                   {"length_penalty", 0.5},
                                                   {"early_stopping", "never"},
                                                   {"top_p", 1},
                                                   {"top_k", -1},
                                                   {"min_p", 0}});
    REQUIRE(request.ok());
    CHECK(request->beam_search());
    CHECK(request->best_of_n == 0);  // the worker ranks the beams itself
    CHECK(request->num_choices() == 2);
    const v1::SamplingParams& s = request->generate.sampling();
    CHECK(s.beam_width() == 4);
    CHECK(s.n() == 2);
    REQUIRE(s.has_temperature());
    CHECK(s.temperature() == 0);
    REQUIRE(s.has_length_penalty());
    CHECK(s.length_penalty() == Approx(0.5));
    CHECK(s.early_stopping() == v1::BEAM_EARLY_STOPPING_NEVER);
    CHECK_FALSE(s.logprobs());
    CHECK_FALSE(s.has_prompt_logprobs());

    // Without best_of the width is n; the defaults leave length_penalty unset and early_stopping false.
    request = parse({{"use_beam_search", true}, {"n", 3}});
    REQUIRE(request.ok());
    CHECK(request->generate.sampling().beam_width() == 3);
    CHECK(request->generate.sampling().n() == 3);
    CHECK_FALSE(request->generate.sampling().has_length_penalty());
    CHECK(request->generate.sampling().early_stopping() == v1::BEAM_EARLY_STOPPING_HEURISTIC);

    request = parse({{"use_beam_search", true}, {"best_of", 2}, {"early_stopping", true}, {"temperature", 0}});
    REQUIRE(request.ok());
    CHECK(request->generate.sampling().beam_width() == 2);
    CHECK(request->num_choices() == 1);
    CHECK(request->generate.sampling().early_stopping() == v1::BEAM_EARLY_STOPPING_WHEN_FULL);
    request = parse({{"use_beam_search", true}, {"n", 2}, {"early_stopping", false}});
    REQUIRE(request.ok());
    CHECK(request->generate.sampling().early_stopping() == v1::BEAM_EARLY_STOPPING_HEURISTIC);
  }

  // Every prompt of a list runs the beam search; echo without logprobs and logprobs without echo need no
  // prompt logprobs.
  absl::StatusOr<OpenAiRequest> request =
      Completion({{"prompt", {"a", "b"}}, {"use_beam_search", true}, {"best_of", 3}, {"echo", true}});
  REQUIRE(request.ok());
  REQUIRE(request->further_prompts.size() == 1);
  CHECK(request->further_prompts[0].sampling().beam_width() == 3);
  CHECK(request->further_prompts[0].sampling().temperature() == 0);
  CHECK(request->total_choices() == 2);
  request = Completion({{"use_beam_search", true}, {"n", 2}, {"logprobs", 2}});
  REQUIRE(request.ok());
  CHECK(request->generate.sampling().logprobs());
  CHECK_FALSE(request->generate.sampling().has_prompt_logprobs());

  // use_beam_search false is the default.
  request = Completion({{"use_beam_search", false}, {"n", 2}, {"length_penalty", 1}, {"early_stopping", false}});
  REQUIRE(request.ok());
  CHECK_FALSE(request->beam_search());
  CHECK(request->generate.sampling().beam_width() == 0);
  CHECK_FALSE(request->generate.sampling().has_length_penalty());
}

TEST_CASE("openai_request: beam search refusals name the parameter", "[unit][openai]") {
  for (const bool chat : {true, false}) {
    INFO((chat ? "chat" : "completion"));
    const auto parse = [chat](json extra) {
      extra["use_beam_search"] = true;
      return chat ? Chat(extra) : Completion(extra);
    };
    ExpectInvalid(parse(json::object()), "n", "greater than 1");
    ExpectInvalid(parse({{"n", 1}}), "n", "greater than 1");
    ExpectInvalid(parse({{"best_of", 1}}), "best_of", "greater than 1");
    ExpectInvalid(parse({{"n", 3}, {"best_of", 2}}), "best_of", "at least 'n'");
    ExpectInvalid(parse({{"best_of", 17}}), "best_of");
    ExpectInvalid(parse({{"n", 2}, {"temperature", 0.7}}), "temperature", "beam search");
    ExpectInvalid(parse({{"n", 2}, {"top_p", 0.9}}), "top_p", "beam search");
    ExpectInvalid(parse({{"n", 2}, {"top_k", 40}}), "top_k", "beam search");
    ExpectInvalid(parse({{"n", 2}, {"min_p", 0.1}}), "min_p", "beam search");
    ExpectInvalid(parse({{"n", 2}, {"stream", true}}), "stream", "'stream' must be false");
    ExpectInvalid(parse({{"n", 2}, {"prompt_logprobs", 1}}), "prompt_logprobs", "use_beam_search");
    ExpectInvalid(parse({{"n", 2}, {"length_penalty", 11}}), "length_penalty");
    ExpectInvalid(parse({{"n", 2}, {"length_penalty", "1"}}), "length_penalty", "number");
    ExpectInvalid(parse({{"n", 2}, {"early_stopping", "sometimes"}}), "early_stopping", "\"never\"");
    ExpectInvalid(parse({{"n", 2}, {"early_stopping", 1}}), "early_stopping", "\"never\"");
  }
  // Echo with logprobs asks for the prompt's logprobs.
  ExpectInvalid(Completion({{"use_beam_search", true}, {"n", 2}, {"echo", true}, {"logprobs", 1}}), "echo",
                "prompt's logprobs");
  // Prompts × beam width, not × n, count towards the 1,024.
  const std::vector<std::string> hundred(100, "x");
  ExpectInvalid(Completion({{"prompt", hundred}, {"use_beam_search", true}, {"best_of", 16}}), "prompt", "1024");
  CHECK(Completion({{"prompt", hundred}, {"use_beam_search", true}, {"n", 10}}).ok());
  ExpectInvalid(Chat({{"use_beam_search", "yes"}}), "use_beam_search", "boolean");
  // Without beam search, chat keeps refusing a best_of other than n.
  ExpectInvalid(Chat({{"n", 2}, {"best_of", 4}}), "best_of", "/v1/completions");
}

TEST_CASE("openai_request: length_penalty and early_stopping need use_beam_search", "[unit][openai]") {
  for (const bool chat : {true, false}) {
    INFO((chat ? "chat" : "completion"));
    const auto parse = [chat](const json& extra) { return chat ? Chat(extra) : Completion(extra); };
    ExpectInvalid(parse({{"length_penalty", 0.5}}), "length_penalty", "use_beam_search");
    ExpectInvalid(parse({{"length_penalty", 2}, {"use_beam_search", false}}), "length_penalty", "use_beam_search");
    ExpectInvalid(parse({{"early_stopping", true}}), "early_stopping", "use_beam_search");
    ExpectInvalid(parse({{"early_stopping", "never"}}), "early_stopping", "use_beam_search");
    ExpectInvalid(parse({{"early_stopping", "yes"}}), "early_stopping", "\"never\"");
    // Their defaults are accepted, and nothing reaches the worker.
    const absl::StatusOr<OpenAiRequest> request = parse({{"length_penalty", 1.0}, {"early_stopping", false}});
    REQUIRE(request.ok());
    CHECK_FALSE(request->generate.sampling().has_length_penalty());
    CHECK(request->generate.sampling().early_stopping() == v1::BEAM_EARLY_STOPPING_HEURISTIC);
    CHECK(request->generate.sampling().beam_width() == 0);
  }
}

}  // namespace
}  // namespace llmc::gateway
