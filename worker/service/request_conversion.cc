#include "worker/service/request_conversion.h"

#include "absl/strings/str_cat.h"
#include "common/request_limits.h"
#include "common/status_macros.h"
#include "worker/engine/request_checks.h"
#include "worker/service/chat_rendering.h"
#include "worker/service/token_restrictions.h"

namespace llmc::worker {

// PromptTokenIds, and the rendered text of a chat prompt when `chat_text` is given.
absl::StatusOr<std::vector<int32_t>> PromptTokenIdsAndText(const v1::GenerateRequest& request, const ServedModel& model,
                                                           std::string* chat_text);

namespace {

absl::Status OutOfRange(absl::string_view field, absl::string_view range, double value) {
  return absl::InvalidArgumentError(absl::StrCat("sampling.", field, " must be ", range, ", got ", value));
}

bool AddSpecialTokens(const v1::GenerateRequest& request, bool by_default) {
  return request.has_add_special_tokens() ? request.add_special_tokens() : by_default;
}

absl::StatusOr<std::vector<int32_t>> Encode(absl::string_view text, bool add_special_tokens, absl::string_view field,
                                            const ServedModel& model) {
  absl::StatusOr<std::vector<int32_t>> ids = model.tokenizer->Encode(text, add_special_tokens);
  if (!ids.ok()) return Annotate(ids.status(), field);
  return ids;
}

absl::Status CheckIdsInVocabulary(absl::Span<const int32_t> ids, absl::string_view field, const ServedModel& model) {
  return engine::CheckIdsInVocabulary(ids, field, model.vocab_size(), model.name());
}

// Copies a float parameter that is set into `out` when it lies in `limit` (NaN never does).
absl::Status CheckFloat(const limits::FloatLimit& limit, bool has, float value, float& out) {
  if (!has) return absl::OkStatus();
  if (!limit.Contains(value)) return OutOfRange(limit.name, limit.Describe(), value);
  out = value;
  return absl::OkStatus();
}

absl::Status CheckFloats(const v1::SamplingParams& params, engine::SamplingOptions& options) {
  RETURN_IF_ERROR(
      CheckFloat(limits::kTemperature, params.has_temperature(), params.temperature(), options.temperature));
  RETURN_IF_ERROR(CheckFloat(limits::kTopP, params.has_top_p(), params.top_p(), options.top_p));
  RETURN_IF_ERROR(CheckFloat(limits::kMinP, params.has_min_p(), params.min_p(), options.min_p));
  RETURN_IF_ERROR(CheckFloat(limits::kRepetitionPenalty, params.has_repetition_penalty(), params.repetition_penalty(),
                             options.repetition_penalty));
  RETURN_IF_ERROR(CheckFloat(limits::kPresencePenalty, params.has_presence_penalty(), params.presence_penalty(),
                             options.presence_penalty));
  return CheckFloat(limits::kFrequencyPenalty, params.has_frequency_penalty(), params.frequency_penalty(),
                    options.frequency_penalty);
}

absl::Status ResolveLengths(const v1::SamplingParams& params, size_t prompt_tokens, const ServedModel& model,
                            engine::SamplingOptions& options) {
  const int64_t prompt = static_cast<int64_t>(prompt_tokens);
  const int64_t context = model.max_model_len();
  if (params.has_max_tokens() && params.max_tokens() < 1) {
    return OutOfRange("max_tokens", "at least 1", params.max_tokens());
  }
  RETURN_IF_ERROR(engine::CheckFitsContext(prompt, params.max_tokens(), "sampling.max_tokens", context, model.name()));
  options.max_tokens = params.has_max_tokens() ? params.max_tokens() : static_cast<uint32_t>(context - prompt);
  options.min_tokens = params.min_tokens();
  if (options.min_tokens > options.max_tokens) {
    return absl::InvalidArgumentError(absl::StrCat("sampling.min_tokens = ", options.min_tokens,
                                                   " must not exceed max_tokens (", options.max_tokens, ")"));
  }
  return absl::OkStatus();
}

// Beam search (vLLM's use_beam_search) over beam_width beams, of which the n best come back. It samples nothing:
// an unset temperature reads as 0 here, and any other sampling setting is refused, as the gateway refuses it.
absl::Status ResolveBeamSearch(const v1::SamplingParams& params, engine::SamplingOptions& options) {
  RETURN_IF_ERROR(
      CheckFloat(limits::kLengthPenalty, params.has_length_penalty(), params.length_penalty(), options.length_penalty));
  if (!v1::BeamEarlyStopping_IsValid(params.early_stopping())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "sampling.early_stopping = ", static_cast<int>(params.early_stopping()), " is not a BeamEarlyStopping value"));
  }
  options.early_stopping = params.early_stopping();
  if (params.beam_width() == 0) {
    if (options.length_penalty != 1.0f) {
      return absl::InvalidArgumentError("sampling.length_penalty applies only with beam search (sampling.beam_width)");
    }
    if (options.early_stopping != v1::BEAM_EARLY_STOPPING_HEURISTIC) {
      return absl::InvalidArgumentError("sampling.early_stopping applies only with beam search (sampling.beam_width)");
    }
    return absl::OkStatus();
  }
  if (params.beam_width() < limits::kMinBeamWidth || params.beam_width() > limits::kMaxChoices) {
    return OutOfRange("beam_width",
                      absl::StrCat("0 (no beam search) or in [", limits::kMinBeamWidth, ", ", limits::kMaxChoices, "]"),
                      params.beam_width());
  }
  options.beam_width = params.beam_width();
  if (options.n > options.beam_width) {
    return absl::InvalidArgumentError(absl::StrCat("sampling.n = ", options.n, " must not exceed sampling.beam_width (",
                                                   options.beam_width, "): beam search returns the n best beams"));
  }
  const std::optional<limits::BeamSearchConflict> conflict = limits::FindBeamSearchConflict(
      params.has_temperature() ? options.temperature : 0, options.top_p, options.top_k, options.min_p);
  if (conflict.has_value()) {
    return OutOfRange(conflict->name, absl::StrCat(conflict->allowed, " with beam search"), conflict->value);
  }
  options.temperature = 0.0f;
  if (options.prompt_logprobs.has_value()) {
    return absl::InvalidArgumentError(
        "sampling.prompt_logprobs is not available with beam search (sampling.beam_width)");
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckModelName(absl::string_view requested, const ServedModel& model) {
  if (requested.empty() || requested == model.name()) return absl::OkStatus();
  return absl::NotFoundError(
      absl::StrCat("model '", requested, "' is not served by this worker; it serves '", model.name(), "'"));
}

absl::StatusOr<std::vector<int32_t>> PromptTokenIds(const v1::GenerateRequest& request, const ServedModel& model) {
  return PromptTokenIdsAndText(request, model, nullptr);
}

absl::StatusOr<std::vector<int32_t>> PromptTokenIdsAndText(const v1::GenerateRequest& request, const ServedModel& model,
                                                           std::string* chat_text) {
  std::vector<int32_t> ids;
  absl::string_view field;
  switch (request.input_case()) {
    case v1::GenerateRequest::kPrompt: {
      field = "prompt";
      ASSIGN_OR_RETURN(ids, Encode(request.prompt(), AddSpecialTokens(request, true), field, model));
      break;
    }
    case v1::GenerateRequest::kPromptTokenIds:
      field = "prompt_token_ids";
      ids.assign(request.prompt_token_ids().ids().begin(), request.prompt_token_ids().ids().end());
      break;
    case v1::GenerateRequest::kChat: {
      field = "chat";
      ASSIGN_OR_RETURN(std::string text, RenderChat(request.chat(), model));
      ASSIGN_OR_RETURN(ids, Encode(text, AddSpecialTokens(request, false), field, model));
      if (chat_text != nullptr) *chat_text = std::move(text);
      break;
    }
    case v1::GenerateRequest::INPUT_NOT_SET:
      return absl::InvalidArgumentError("one of prompt, prompt_token_ids or chat is required");
  }
  if (ids.empty()) return absl::InvalidArgumentError(absl::StrCat(field, " is empty: it has no tokens"));
  RETURN_IF_ERROR(CheckIdsInVocabulary(ids, field == "prompt_token_ids" ? field : "prompt token ids", model));
  return ids;
}

absl::StatusOr<engine::SamplingOptions> ToSamplingOptions(const v1::SamplingParams& params, size_t prompt_tokens,
                                                          const ServedModel& model) {
  engine::SamplingOptions options;
  RETURN_IF_ERROR(CheckFloats(params, options));
  if (params.has_top_k()) {
    // vLLM and older OpenAI-compatible clients send -1 for "disabled".
    if (params.top_k() < limits::kMinTopK) {
      return OutOfRange("top_k", "at least 0 (or -1 for disabled)", params.top_k());
    }
    options.top_k = params.top_k() == -1 ? 0 : params.top_k();
  }
  RETURN_IF_ERROR(ResolveLengths(params, prompt_tokens, model, options));
  options.n = params.n() == 0 ? 1 : params.n();
  if (options.n > limits::kMaxChoices) {
    return OutOfRange("n", absl::StrCat("in [1, ", limits::kMaxChoices, "]"), options.n);
  }
  options.logprobs = params.logprobs();
  options.top_logprobs = params.top_logprobs();
  if (options.top_logprobs > limits::kMaxTopLogprobs) {
    return OutOfRange("top_logprobs", absl::StrCat("in [0, ", limits::kMaxTopLogprobs, "]"), options.top_logprobs);
  }
  if (options.top_logprobs > 0 && !options.logprobs) {
    return absl::InvalidArgumentError("sampling.top_logprobs needs sampling.logprobs to be true");
  }
  if (params.has_prompt_logprobs()) {
    if (params.prompt_logprobs() > limits::kMaxTopLogprobs) {
      return OutOfRange("prompt_logprobs", absl::StrCat("in [0, ", limits::kMaxTopLogprobs, "]"),
                        params.prompt_logprobs());
    }
    options.prompt_logprobs = params.prompt_logprobs();
  }
  if (params.has_seed()) options.seed = params.seed();
  if (params.stop_size() > limits::kMaxStopStrings) {
    return absl::InvalidArgumentError(
        absl::StrCat("sampling.stop may hold at most ", limits::kMaxStopStrings, " strings, got ", params.stop_size()));
  }
  for (int i = 0; i < params.stop_size(); ++i) {
    if (params.stop(i).empty()) {
      return absl::InvalidArgumentError(absl::StrCat("sampling.stop[", i, "] must not be empty"));
    }
    if (params.stop(i).size() > limits::kMaxStopStringBytes) {
      return absl::InvalidArgumentError(absl::StrCat("sampling.stop[", i, "] may be at most ",
                                                     limits::kMaxStopStringBytes, " bytes long, got ",
                                                     params.stop(i).size()));
    }
  }
  options.stop.assign(params.stop().begin(), params.stop().end());
  if (params.stop_token_ids_size() > limits::kMaxStopTokenIds) {
    return absl::InvalidArgumentError(absl::StrCat("sampling.stop_token_ids may hold at most ",
                                                   limits::kMaxStopTokenIds, " ids, got ",
                                                   params.stop_token_ids_size()));
  }
  options.stop_token_ids.assign(params.stop_token_ids().begin(), params.stop_token_ids().end());
  RETURN_IF_ERROR(CheckIdsInVocabulary(options.stop_token_ids, "sampling.stop_token_ids", model));
  options.ignore_eos = params.ignore_eos();
  options.skip_special_tokens = !params.has_skip_special_tokens() || params.skip_special_tokens();
  options.include_stop_str_in_output = params.include_stop_str_in_output();
  RETURN_IF_ERROR(ResolveBeamSearch(params, options));
  RETURN_IF_ERROR(ResolveTokenRestrictions(params, model, options));
  return options;
}

absl::StatusOr<engine::GenerationRequest> ToGenerationRequest(const v1::GenerateRequest& request,
                                                              const ServedModel& model,
                                                              std::optional<TypedOutputPlan>* typed) {
  RETURN_IF_ERROR(CheckModelName(request.model(), model));
  engine::GenerationRequest out;
  out.request_id = request.request_id();
  if (request.cache_salt().size() > limits::kMaxWorkerCacheSaltBytes) {
    return absl::InvalidArgumentError(absl::StrCat("cache_salt may be at most ", limits::kMaxWorkerCacheSaltBytes,
                                                   " bytes, got ", request.cache_salt().size()));
  }
  out.cache_salt = request.cache_salt();
  std::string chat_text;
  ASSIGN_OR_RETURN(out.prompt_token_ids, PromptTokenIdsAndText(request, model, &chat_text));
  ASSIGN_OR_RETURN(out.sampling, ToSamplingOptions(request.sampling(), out.prompt_token_ids.size(), model));
  if (typed != nullptr && request.has_chat()) {
    ASSIGN_OR_RETURN(TypedOutputPlan plan, PlanTypedOutput(request, model, chat_text));
    if (out.sampling.beam_width > 0 && plan.constraint.has_value()) {
      return absl::InvalidArgumentError(
          "tool_choice: forced or strict tool calls are constrained by a grammar, which beam search cannot use");
    }
    out.sampling.decoded_special_tokens = plan.decoded_special_tokens;
    if (plan.constraint.has_value()) out.sampling.constrained = true;
    *typed = std::move(plan);
  }
  return out;
}

absl::StatusOr<std::vector<engine::GenerationRequest>> ToEmbeddingRequests(const v1::EmbedRequest& request,
                                                                           const ServedModel& model) {
  RETURN_IF_ERROR(CheckModelName(request.model(), model));
  const std::string& pooling = model.info.embedding_pooling();
  if (pooling != "last" && pooling != "mean") {
    return absl::FailedPreconditionError(
        absl::StrCat("model ", model.name(),
                     " serves no embeddings (its package was exported with --embedding-pooling none, or before format "
                     "version 6; re-export it with tools/export_model.py)"));
  }
  if (request.inputs().empty()) return absl::InvalidArgumentError("input is empty: there is nothing to embed");
  if (request.dimensions() != 0 && request.dimensions() != model.embedding_size) {
    return absl::InvalidArgumentError(absl::StrCat("dimensions: model ", model.name(), " gives ", model.embedding_size,
                                                   "-dimensional embeddings and cannot give ", request.dimensions(),
                                                   "-dimensional ones"));
  }
  const bool add_special_tokens = !request.has_add_special_tokens() || request.add_special_tokens();
  std::vector<engine::GenerationRequest> requests;
  requests.reserve(request.inputs_size());
  for (int i = 0; i < request.inputs_size(); ++i) {
    const v1::EmbedInput& input = request.inputs(i);
    const std::string field = absl::StrCat("input[", i, "]");
    engine::GenerationRequest& converted = requests.emplace_back();
    converted.request_id = absl::StrCat(request.request_id(), "-", i);
    converted.pooling = pooling == "mean" ? engine::Pooling::kMean : engine::Pooling::kLast;
    converted.sampling.max_tokens = 0;
    if (input.input_case() == v1::EmbedInput::INPUT_NOT_SET) {
      return absl::InvalidArgumentError(absl::StrCat(field, " has neither text nor token ids"));
    }
    if (input.has_token_ids()) {
      converted.prompt_token_ids.assign(input.token_ids().ids().begin(), input.token_ids().ids().end());
    } else {
      ASSIGN_OR_RETURN(converted.prompt_token_ids, Encode(input.text(), add_special_tokens, field, model));
    }
    if (converted.prompt_token_ids.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(field, " is empty: it has no tokens"));
    }
    RETURN_IF_ERROR(CheckIdsInVocabulary(converted.prompt_token_ids, field, model));
    RETURN_IF_ERROR(engine::CheckInputFitsContext(static_cast<int64_t>(converted.prompt_token_ids.size()), field,
                                                  model.max_model_len()));
  }
  return requests;
}

absl::StatusOr<v1::TokenizeResponse> Tokenize(const v1::TokenizeRequest& request, const ServedModel& model) {
  RETURN_IF_ERROR(CheckModelName(request.model(), model));
  std::vector<int32_t> ids;
  switch (request.input_case()) {
    case v1::TokenizeRequest::kText: {
      // The same encoding Generate applies to a prompt, so counts agree.
      ASSIGN_OR_RETURN(ids, Encode(request.text(), !request.has_add_special_tokens() || request.add_special_tokens(),
                                   "text", model));
      break;
    }
    case v1::TokenizeRequest::kChat: {
      ASSIGN_OR_RETURN(const std::string text, RenderChat(request.chat(), model));
      ASSIGN_OR_RETURN(ids,
                       Encode(text, request.has_add_special_tokens() && request.add_special_tokens(), "chat", model));
      break;
    }
    case v1::TokenizeRequest::INPUT_NOT_SET:
      return absl::InvalidArgumentError("one of text or chat is required");
  }
  v1::TokenizeResponse response;
  response.set_count(static_cast<uint32_t>(ids.size()));
  response.set_max_context_length(static_cast<uint32_t>(model.max_model_len()));
  if (!request.count_only()) response.mutable_token_ids()->Add(ids.begin(), ids.end());
  return response;
}

absl::StatusOr<v1::DetokenizeResponse> Detokenize(const v1::DetokenizeRequest& request, const ServedModel& model) {
  RETURN_IF_ERROR(CheckModelName(request.model(), model));
  const bool skip_special_tokens = !request.has_skip_special_tokens() || request.skip_special_tokens();
  absl::StatusOr<std::string> text = model.tokenizer->Decode(
      absl::MakeConstSpan(request.token_ids().data(), request.token_ids().size()), skip_special_tokens);
  if (!text.ok()) return Annotate(text.status(), "token_ids");
  v1::DetokenizeResponse response;
  response.set_text(*std::move(text));
  return response;
}

}  // namespace llmc::worker
