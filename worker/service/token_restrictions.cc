#include "worker/service/token_restrictions.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/request_limits.h"
#include "common/status_macros.h"

namespace llmc::worker {
namespace {

absl::Status CheckId(int32_t id, absl::string_view field, const ServedModel& model) {
  if (id >= 0 && id < model.vocab_size()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(field, " names token ", id, ", which is outside the vocabulary of ",
                                                 model.name(), " (", model.vocab_size(), " ids)"));
}

absl::Status ResolveLogitBias(const v1::SamplingParams& params, const ServedModel& model,
                              engine::SamplingOptions& options) {
  if (params.logit_bias_size() > limits::kMaxLogitBiasEntries) {
    return absl::InvalidArgumentError(absl::StrCat("sampling.logit_bias may hold at most ",
                                                   limits::kMaxLogitBiasEntries, " entries, got ",
                                                   params.logit_bias_size()));
  }
  for (const auto& [id, bias] : params.logit_bias()) {
    RETURN_IF_ERROR(CheckId(id, "sampling.logit_bias", model));
    if (!limits::kLogitBias.Contains(bias)) {
      return absl::InvalidArgumentError(
          absl::StrCat("sampling.logit_bias[", id, "] must be ", limits::kLogitBias.Describe(), ", got ", bias));
    }
    if (bias != 0) options.logit_bias.push_back({id, bias});
  }
  std::sort(options.logit_bias.begin(), options.logit_bias.end());
  return absl::OkStatus();
}

absl::Status ResolveAllowedTokens(const v1::SamplingParams& params, const ServedModel& model,
                                  engine::SamplingOptions& options) {
  if (params.allowed_token_ids_size() == 0) return absl::OkStatus();
  if (params.allowed_token_ids_size() > limits::kMaxAllowedTokenIds) {
    return absl::InvalidArgumentError(absl::StrCat("sampling.allowed_token_ids may hold at most ",
                                                   limits::kMaxAllowedTokenIds, " ids, got ",
                                                   params.allowed_token_ids_size()));
  }
  options.allowed_token_mask.assign(static_cast<size_t>((model.vocab_size() + 63) / 64), 0);
  for (const int32_t id : params.allowed_token_ids()) {
    RETURN_IF_ERROR(CheckId(id, "sampling.allowed_token_ids", model));
    options.allowed_token_mask[static_cast<size_t>(id) >> 6] |= uint64_t{1} << (id & 63);
  }
  return absl::OkStatus();
}

// As vLLM: each word as written and after a space (how it appears mid-sentence), each tokenization banned.
absl::Status ResolveBadWords(const v1::SamplingParams& params, const ServedModel& model,
                             engine::SamplingOptions& options) {
  if (params.bad_words_size() > limits::kMaxBadWords) {
    return absl::InvalidArgumentError(absl::StrCat("sampling.bad_words may hold at most ", limits::kMaxBadWords,
                                                   " words, got ", params.bad_words_size()));
  }
  for (int i = 0; i < params.bad_words_size(); ++i) {
    const std::string& word = params.bad_words(i);
    if (word.empty() || word.size() > limits::kMaxBadWordBytes) {
      return absl::InvalidArgumentError(absl::StrCat("sampling.bad_words[", i, "] must hold 1 to ",
                                                     limits::kMaxBadWordBytes, " bytes, got ", word.size()));
    }
    for (const std::string& form : {word, absl::StrCat(" ", word)}) {
      absl::StatusOr<std::vector<int32_t>> ids = model.tokenizer->Encode(form, /*add_special_tokens=*/false);
      if (!ids.ok()) return Annotate(ids.status(), absl::StrCat("sampling.bad_words[", i, "]"));
      if (ids->empty() ||
          std::find(options.bad_words.begin(), options.bad_words.end(), *ids) != options.bad_words.end()) {
        continue;
      }
      options.bad_words.push_back(*std::move(ids));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ResolveTokenRestrictions(const v1::SamplingParams& params, const ServedModel& model,
                                      engine::SamplingOptions& options) {
  RETURN_IF_ERROR(ResolveLogitBias(params, model, options));
  RETURN_IF_ERROR(ResolveAllowedTokens(params, model, options));
  RETURN_IF_ERROR(ResolveBadWords(params, model, options));
  options.constrained = params.has_constraint();
  if (options.beam_search() && (options.masks_logits() || !options.bad_words.empty())) {
    return absl::InvalidArgumentError(
        "structured outputs, logit_bias, allowed_token_ids and bad_words are not available with beam search "
        "(sampling.beam_width)");
  }
  return absl::OkStatus();
}

}  // namespace llmc::worker
