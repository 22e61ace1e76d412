#ifndef LLMC_GATEWAY_OPENAI_ANSWER_SIZE_H_
#define LLMC_GATEWAY_OPENAI_ANSWER_SIZE_H_

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "gateway/openai/openai_request.h"

namespace llmc::gateway {

// The least bytes a non-streamed answer to `request` can take: every generated choice's max_tokens tokens
// at the fewest bytes their logprobs entries can print in (empty token texts, logprobs of 0), and each
// choice's echoed prompt. 0 when the request sets no max_tokens and echoes nothing. Streamed answers hold
// nothing and are never refused.
uint64_t LeastAnswerBytes(const OpenAiRequest& request);

// INVALID_ARGUMENT naming the numbers when a non-streamed answer to `request` could never fit in
// `max_response_bytes` (the gateway's cap on a non-streamed answer); OK otherwise.
absl::Status CheckAnswerCanFit(const OpenAiRequest& request, uint64_t max_response_bytes);

// The error that ends a non-streamed answer that grew to `bytes`, past `max_response_bytes`.
absl::Status AnswerTooLarge(size_t bytes, uint64_t max_response_bytes);

}  // namespace llmc::gateway

#endif  // LLMC_GATEWAY_OPENAI_ANSWER_SIZE_H_
