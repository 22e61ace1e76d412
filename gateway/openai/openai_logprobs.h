#ifndef LLMC_GATEWAY_OPENAI_OPENAI_LOGPROBS_H_
#define LLMC_GATEWAY_OPENAI_OPENAI_LOGPROBS_H_

#include <cstdint>

#include "google/protobuf/repeated_ptr_field.h"
#include "llmc/v1/types.pb.h"
#include "nlohmann/json.hpp"

namespace llmc::gateway {

using TokenLogprobs = google::protobuf::RepeatedPtrField<v1::TokenLogprob>;

// Chat: appends {"token","logprob","bytes","top_logprobs":[{"token","logprob","bytes"}]} per token to the
// array that becomes `logprobs.content`.
void AppendChatLogprobs(const TokenLogprobs& logprobs, nlohmann::ordered_json& content);

// Completions: {"tokens":[],"token_logprobs":[],"top_logprobs":[],"text_offset":[]}.
nlohmann::ordered_json EmptyCompletionLogprobs();
// Appends one entry per token to each array of `out`. `top_logprobs` maps token text to logprob for the
// alternatives and the sampled token itself; `text_offset` is where the token's text starts in the choice's
// text, in code points like Python's len(); `text_offset` is advanced past each token.
void AppendCompletionLogprobs(const TokenLogprobs& logprobs, uint64_t& text_offset, nlohmann::ordered_json& out);

// The number of code points in UTF-8 `text` (ill-formed bytes count by their lead bytes).
uint64_t CountCodePoints(const std::string& text);

}  // namespace llmc::gateway

#endif  // LLMC_GATEWAY_OPENAI_OPENAI_LOGPROBS_H_
