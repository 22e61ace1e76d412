#ifndef LLMC_GATEWAY_OPENAI_OPENAI_REQUEST_H_
#define LLMC_GATEWAY_OPENAI_OPENAI_REQUEST_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "llmc/v1/worker.pb.h"
#include "nlohmann/json.hpp"

namespace llmc::gateway {

enum class OpenAiKind {
  kChat,        // POST /v1/chat/completions
  kCompletion,  // POST /v1/completions
};

// A validated OpenAI request and the worker request it becomes.
struct OpenAiRequest {
  OpenAiKind kind = OpenAiKind::kChat;
  std::string model;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  bool echo = false;           // completions: put the prompt before the generated text
  // Chat: `logprobs` is the boolean and `top_logprobs` (0..20) the alternatives per token. Completions:
  // `logprobs` is set when the integer was given and `top_logprobs` is its value (0..5).
  bool logprobs = false;
  uint32_t top_logprobs = 0;
  // vLLM's prompt_logprobs: each choice (chat: the response) also gets the prompt's logprobs with this many
  // alternatives per position. Not with streaming.
  std::optional<uint32_t> prompt_logprobs;
  bool tokens_as_ids = false;  // vLLM's return_tokens_as_token_ids: logprobs name tokens "token_id:<id>"
  // Chat: for each function tool forwarded to the worker, its index in the client's `tools` (tools of other
  // types are left out), so an error about a tool names the one the client sent.
  std::vector<uint32_t> tool_positions;
  bool include_reasoning = true;  // chat: vLLM's include_reasoning (false: reasoning is parsed, then dropped)
  v1::GenerateRequest generate;   // model, input, sampling and user filled; request_id left to the caller
  // Completions with a `prompt` list: the prompts after the first (which is `generate`'s input), each a
  // copy of `generate` with its own input. Each runs as its own generation; its choices are numbered after
  // those of the prompts before it, as OpenAI numbers them (prompt i, sample j: index i * n + j).
  std::vector<v1::GenerateRequest> further_prompts;
  std::vector<std::string> echo_texts;  // `echo`: each prompt's text, in order
  // Completions with best_of > n: the client's n. Each prompt then generates num_choices() (= best_of)
  // choices and the answer keeps the best_of_n with the highest cumulative logprob. 0: every choice is kept,
  // as with beam search, whose worker returns only the n best beams, already ranked.
  uint32_t best_of_n = 0;

  // vLLM's use_beam_search: each prompt runs generate.sampling().beam_width() beams (best_of, or n) and
  // answers with its n best.
  bool beam_search() const { return generate.sampling().beam_width() > 0; }
  // The number of choices generated per prompt (`n`, or `best_of` when larger; at least 1). With beam search,
  // the n beams returned.
  uint32_t num_choices() const { return generate.sampling().n() == 0 ? 1 : generate.sampling().n(); }
  uint32_t num_prompts() const { return 1 + static_cast<uint32_t>(further_prompts.size()); }
  uint32_t total_choices() const { return num_choices() * num_prompts(); }
};

// The JSON body of a request as an object: valid UTF-8, nested at most limits::kMaxJsonDepth deep, and
// INVALID_ARGUMENT saying where the parse failed otherwise.
absl::StatusOr<nlohmann::json> ParseRequestBody(std::string_view body);

// A JSON array of token ids (non-empty, each in [0, 2^31)); errors name `param`.
absl::StatusOr<std::vector<int32_t>> ReadTokenIds(const nlohmann::json& ids, std::string_view param);

// Parse and validate the JSON body of POST /v1/chat/completions or /v1/completions. Errors are
// INVALID_ARGUMENT naming the offending parameter (see ParameterOf); unknown fields are ignored.
absl::StatusOr<OpenAiRequest> ParseChatCompletionRequest(std::string_view body);
absl::StatusOr<OpenAiRequest> ParseCompletionRequest(std::string_view body);

}  // namespace llmc::gateway

#endif  // LLMC_GATEWAY_OPENAI_OPENAI_REQUEST_H_
