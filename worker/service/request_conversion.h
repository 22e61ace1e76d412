#ifndef LLMC_WORKER_SERVICE_REQUEST_CONVERSION_H_
#define LLMC_WORKER_SERVICE_REQUEST_CONVERSION_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "llmc/v1/worker.pb.h"
#include "worker/engine/generation.h"
#include "worker/engine/sampling_options.h"
#include "worker/service/served_model.h"
#include "worker/service/typed_output_plan.h"

namespace llmc::worker {

// From the wire to the engine: every check here answers INVALID_ARGUMENT naming the field
// (e.g. "sampling.top_p must be in (0, 1], got 1.5"), or NOT_FOUND naming the served model.

// An empty name is read as the served model, since a worker serves exactly one.
absl::Status CheckModelName(absl::string_view requested, const ServedModel& model);

// The prompt's ids: text is tokenized with the tokenizer's special tokens added; chat messages are rendered
// with the model's template (the template writes its own special tokens); ids must be inside the vocabulary.
absl::StatusOr<std::vector<int32_t>> PromptTokenIds(const v1::GenerateRequest& request, const ServedModel& model);

// Resolves defaults and checks ranges. Unset max_tokens means the rest of the context after the prompt.
absl::StatusOr<engine::SamplingOptions> ToSamplingOptions(const v1::SamplingParams& params, size_t prompt_tokens,
                                                          const ServedModel& model);

// Model name, prompt and sampling together; the deadline is left for the caller. A chat request with
// `typed` given also gets its typed-output plan there (tool calls, reasoning; docs/tool-calling.md), whose
// special tokens the request then decodes.
absl::StatusOr<engine::GenerationRequest> ToGenerationRequest(const v1::GenerateRequest& request,
                                                              const ServedModel& model,
                                                              std::optional<TypedOutputPlan>* typed = nullptr);

// An Embed request's inputs as engine requests (pooling as the package says), in order. Errors name the
// input ("input[2] is empty"); FAILED_PRECONDITION when the package serves no embeddings.
absl::StatusOr<std::vector<engine::GenerationRequest>> ToEmbeddingRequests(const v1::EmbedRequest& request,
                                                                           const ServedModel& model);

absl::StatusOr<v1::TokenizeResponse> Tokenize(const v1::TokenizeRequest& request, const ServedModel& model);
absl::StatusOr<v1::DetokenizeResponse> Detokenize(const v1::DetokenizeRequest& request, const ServedModel& model);

}  // namespace llmc::worker

#endif  // LLMC_WORKER_SERVICE_REQUEST_CONVERSION_H_
