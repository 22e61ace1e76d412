#include "worker/engine/request_checks.h"

#include "absl/strings/str_cat.h"

namespace llmc::engine {

absl::Status CheckIdsInVocabulary(absl::Span<const int32_t> ids, absl::string_view field, int64_t vocab_size,
                                  absl::string_view model_name) {
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= vocab_size) {
      return absl::InvalidArgumentError(absl::StrCat(field, "[", i, "] = ", ids[i], " is outside the vocabulary of ",
                                                     model_name, " (", vocab_size, " ids)"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckFitsContext(int64_t prompt_tokens, int64_t max_tokens, absl::string_view max_tokens_field,
                              int64_t context_length, absl::string_view model_name) {
  if (prompt_tokens >= context_length) {
    return absl::InvalidArgumentError(absl::StrCat("the prompt has ", prompt_tokens,
                                                   " tokens but the context length of ", model_name, " is ",
                                                   context_length, ", which leaves no room for a completion"));
  }
  if (max_tokens > 0 && prompt_tokens + max_tokens > context_length) {
    return absl::InvalidArgumentError(absl::StrCat(
        max_tokens_field, " = ", max_tokens, " plus the prompt's ", prompt_tokens, " tokens is ",
        prompt_tokens + max_tokens, ", past the context length of ", model_name, " (", context_length, ")"));
  }
  return absl::OkStatus();
}

absl::Status CheckInputFitsContext(int64_t input_tokens, absl::string_view field, int64_t context_length) {
  if (input_tokens <= context_length) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("this model's maximum context length is ", context_length,
                                                 " tokens, but ", field, " has ", input_tokens));
}

}  // namespace llmc::engine
