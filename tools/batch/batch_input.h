#ifndef LLMC_TOOLS_BATCH_BATCH_INPUT_H_
#define LLMC_TOOLS_BATCH_BATCH_INPUT_H_

#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "gateway/openai/embedding_request.h"
#include "gateway/openai/openai_request.h"

namespace llmc::batch {

// One request of the batch, checked as the gateway checks it.
struct BatchRequest {
  std::string url;  // /v1/chat/completions, /v1/completions or /v1/embeddings
  std::optional<gateway::OpenAiRequest> generation;
  std::optional<gateway::EmbeddingRequest> embedding;
};

// One input line. `line_error` is set when the line is not a batch request at all (not JSON, no custom_id,
// another method or url); `request_error` when it is one but its body is refused (the error the gateway
// would answer with). Otherwise `request` holds it.
struct BatchLine {
  std::string custom_id;
  absl::Status line_error;
  absl::Status request_error;
  std::optional<BatchRequest> request;
};

// An OpenAI batch input line: {"custom_id", "method": "POST", "url", "body"}.
BatchLine ParseOpenAiBatchLine(std::string_view line);

// A plain prompt (one line of a prompts file) as a /v1/completions request for `model`; its custom_id is
// "prompt-<line number>".
BatchLine PromptLine(std::string_view prompt, int64_t line_number, const std::string& model, int64_t max_tokens,
                     double temperature);

// Whether a file whose first non-empty line is `first_line` is an OpenAI batch file (JSON objects) rather
// than plain prompts.
bool LooksLikeOpenAiBatch(std::string_view first_line);

}  // namespace llmc::batch

#endif  // LLMC_TOOLS_BATCH_BATCH_INPUT_H_
