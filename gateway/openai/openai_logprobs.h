#ifndef LLMC_GATEWAY_OPENAI_OPENAI_LOGPROBS_H_
#define LLMC_GATEWAY_OPENAI_OPENAI_LOGPROBS_H_

#include <cstdint>

#include "google/protobuf/repeated_ptr_field.h"
#include "llmc/v1/types.pb.h"
#include "nlohmann/json.hpp"

namespace llmc::gateway {

using TokenLogprobs = google::protobuf::RepeatedPtrField<v1::TokenLogprob>;

// Each function below names tokens by their text, or as "token_id:<id>" when `tokens_as_ids` (vLLM's
// return_tokens_as_token_ids, for tokens whose text is not valid UTF-8 on its own); text offsets always
// count the text.

// Chat: appends {"token","logprob","bytes","top_logprobs":[{"token","logprob","bytes"}]} per token to the
// array that becomes `logprobs.content`.
void AppendChatLogprobs(const TokenLogprobs& logprobs, bool tokens_as_ids, nlohmann::ordered_json& content);

// Completions: {"tokens":[],"token_logprobs":[],"top_logprobs":[],"text_offset":[]}.
nlohmann::ordered_json EmptyCompletionLogprobs();
// Appends one entry per token to each array of `out`. `top_logprobs` maps token text to logprob for the
// alternatives and the sampled token itself; `text_offset` is where the token's text starts in the choice's
// text, in code points like Python's len(); `text_offset` is advanced past each token.
void AppendCompletionLogprobs(const TokenLogprobs& logprobs, bool tokens_as_ids, uint64_t& text_offset,
                              nlohmann::ordered_json& out);
// One token's entries, with at most `max_alternatives` alternatives.
void AppendCompletionTokenLogprob(const v1::TokenLogprob& token, size_t max_alternatives, bool tokens_as_ids,
                                  uint64_t& text_offset, nlohmann::ordered_json& out);

// Completions with echo: the prompt's tokens, the first with null token_logprobs and top_logprobs, the others
// with at most `alternatives` alternatives (the token itself always comes too).
void AppendCompletionPromptLogprobs(const TokenLogprobs& prompt, uint32_t alternatives, bool tokens_as_ids,
                                    uint64_t& text_offset, nlohmann::ordered_json& out);
// vLLM's `prompt_logprobs`: [null, {"<token id>": {"logprob", "rank", "decoded_token"}}, ...], one entry per
// prompt token with the token itself and at most `alternatives` alternatives.
nlohmann::ordered_json VllmPromptLogprobs(const TokenLogprobs& prompt, uint32_t alternatives);
// One position's entry of that array (not the first, which is null).
nlohmann::ordered_json VllmPromptLogprobsPosition(const v1::TokenLogprob& token, uint32_t alternatives);

// The number of code points in UTF-8 `text` (ill-formed bytes count by their lead bytes).
uint64_t CountCodePoints(const std::string& text);

}  // namespace llmc::gateway

#endif  // LLMC_GATEWAY_OPENAI_OPENAI_LOGPROBS_H_
