#ifndef LLMC_GATEWAY_OPENAI_TOKENIZE_REQUEST_H_
#define LLMC_GATEWAY_OPENAI_TOKENIZE_REQUEST_H_

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "llmc/v1/worker.pb.h"

namespace llmc::gateway {

// POST /tokenize and POST /detokenize, in vLLM's shapes. `model` may be left out (the request's model()
// is then empty), as vLLM allows when it serves one model.
//
// /tokenize: {"model", "prompt": "text", "add_special_tokens": true} or {"model", "messages": [...],
// "add_generation_prompt", "chat_template", "chat_template_kwargs", "tools", "add_special_tokens": false}
//   → {"count", "max_model_len", "tokens": [...], "token_strs": null}
// /detokenize: {"model", "tokens": [...]} → {"prompt": "text"}
absl::StatusOr<v1::TokenizeRequest> ParseTokenizeRequest(std::string_view body);
absl::StatusOr<v1::DetokenizeRequest> ParseDetokenizeRequest(std::string_view body);

std::string TokenizeResponseJson(const v1::TokenizeResponse& response);
std::string DetokenizeResponseJson(const v1::DetokenizeResponse& response);

}  // namespace llmc::gateway

#endif  // LLMC_GATEWAY_OPENAI_TOKENIZE_REQUEST_H_
