#ifndef LLMC_WORKER_ENGINE_REQUEST_CHECKS_H_
#define LLMC_WORKER_ENGINE_REQUEST_CHECKS_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

// The checks of a request against the model that the worker's request conversion (the client's fields, named
// as the client sent them) and the engine (any caller, llmc-batch included) both make, written once. Each is
// INVALID_ARGUMENT naming the numbers.
namespace llmc::engine {

// Every id in [0, vocab_size): "<field>[i] = <id> is outside the vocabulary of <model> (<vocab_size> ids)".
absl::Status CheckIdsInVocabulary(absl::Span<const int32_t> ids, absl::string_view field, int64_t vocab_size,
                                  absl::string_view model_name);

// A prompt of `prompt_tokens` leaves room for a completion, and with `max_tokens` (when positive; the field
// that set it named `max_tokens_field`) fits the context of `context_length` tokens.
absl::Status CheckFitsContext(int64_t prompt_tokens, int64_t max_tokens, absl::string_view max_tokens_field,
                              int64_t context_length, absl::string_view model_name);

// An input to embed (`field`) fits the context: it needs no room for a completion.
absl::Status CheckInputFitsContext(int64_t input_tokens, absl::string_view field, int64_t context_length);

}  // namespace llmc::engine

#endif  // LLMC_WORKER_ENGINE_REQUEST_CHECKS_H_
