#ifndef LLMC_GATEWAY_OPENAI_EMBEDDING_REQUEST_H_
#define LLMC_GATEWAY_OPENAI_EMBEDDING_REQUEST_H_

#include <cstddef>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "llmc/v1/worker.pb.h"

namespace llmc::gateway {

// The most inputs one POST /v1/embeddings may carry (OpenAI's limit).
inline constexpr size_t kMaxEmbeddingInputs = 2048;

// POST /v1/embeddings in OpenAI's shape:
//   {"model", "input": "text" | ["text", ...] | [ids...] | [[ids...], ...], "encoding_format": "float" |
//    "base64", "dimensions", "user", "add_special_tokens" (vLLM)}
// `model` may be left out as for /tokenize. Errors are INVALID_ARGUMENT naming the parameter.
struct EmbeddingRequest {
  v1::EmbedRequest embed;
  bool base64 = false;
};
absl::StatusOr<EmbeddingRequest> ParseEmbeddingRequest(std::string_view body);

// {"object": "list", "data": [{"object": "embedding", "index", "embedding"}...], "model", "usage"}; each
// embedding a JSON array of floats, or with `base64` the base64 of its little-endian float32 bytes.
std::string EmbeddingResponseJson(const v1::EmbedResponse& response, const std::string& model, bool base64);

}  // namespace llmc::gateway

#endif  // LLMC_GATEWAY_OPENAI_EMBEDDING_REQUEST_H_
