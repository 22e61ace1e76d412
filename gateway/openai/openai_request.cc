#include "gateway/openai/openai_request.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/request_limits.h"
#include "common/status_macros.h"
#include "common/utf8.h"
#include "gateway/openai/chat_input.h"
#include "gateway/openai/json_fields.h"
#include "gateway/openai/openai_error.h"
#include "gateway/openai/structured_output_request.h"
#include "nlohmann/json.hpp"

namespace llmc::gateway {
namespace {

using nlohmann::json;

using limits::kMaxChoices;
using limits::kMaxCompletionLogprobs;
using limits::kMaxStopStrings;
constexpr int64_t kMaxTokenCount = std::numeric_limits<int32_t>::max();
constexpr int64_t kMaxTokenId = std::numeric_limits<int32_t>::max();

}  // namespace

absl::StatusOr<json> ParseRequestBody(std::string_view body) {
  if (const std::optional<size_t> bad = FindInvalidUtf8(absl::string_view(body.data(), body.size()))) {
    return InvalidParameter("",
                            absl::StrCat("the request body is not valid UTF-8 (first bad byte at offset ", *bad, ")"));
  }
  RETURN_IF_ERROR(CheckJsonText(body, "", "the request body"));
  json parsed;
  try {
    parsed = json::parse(body.begin(), body.end());
  } catch (const json::exception& e) {
    return InvalidParameter("",
                            absl::StrCat("could not parse the JSON body of the request: ", JsonParseErrorDetail(e)));
  }
  if (!parsed.is_object()) {
    return InvalidParameter("", absl::StrCat("the request body must be a JSON object, not ", DescribeJsonType(parsed)));
  }
  return parsed;
}

absl::StatusOr<std::vector<int32_t>> ReadTokenIds(const json& ids, std::string_view param_view) {
  const std::string param(param_view);
  std::vector<int32_t> out;
  out.reserve(ids.size());
  for (const json& id : ids) {
    if (!id.is_number_integer()) {
      return InvalidParameter(
          param, absl::StrCat("'", param, "' must hold only token ids (integers), not ", DescribeJsonType(id)));
    }
    if (id.is_number_unsigned() ? id.get<uint64_t>() > static_cast<uint64_t>(kMaxTokenId) : id.get<int64_t>() < 0) {
      return InvalidParameter(param, absl::StrCat("'", param, "' holds ", DumpJson(id), ", which is not a token id"));
    }
    out.push_back(static_cast<int32_t>(id.get<int64_t>()));
  }
  if (out.empty()) return InvalidParameter(param, absl::StrCat("the token id list of '", param, "' is empty"));
  return out;
}

namespace {

absl::Status ParseModel(const FieldReader& fields, OpenAiRequest& request) {
  ASSIGN_OR_RETURN(const std::optional<std::string> model, fields.String("model"));
  if (!model.has_value() || model->empty()) {
    return InvalidParameter("model", "you must provide a model parameter ('model' is missing or empty)");
  }
  request.model = *model;
  request.generate.set_model(*model);
  return absl::OkStatus();
}

absl::Status ParseStreaming(const FieldReader& fields, OpenAiRequest& request) {
  ASSIGN_OR_RETURN(const std::optional<bool> stream, fields.Bool("stream"));
  request.stream = stream.value_or(false);
  const json* options = fields.Find("stream_options");
  if (options == nullptr) return absl::OkStatus();
  if (!options->is_object()) return fields.WrongType("stream_options", *options, "an object");
  if (!request.stream) {
    return InvalidParameter("stream_options", "'stream_options' is only allowed when 'stream' is true");
  }
  ASSIGN_OR_RETURN(const std::optional<bool> include_usage,
                   FieldReader(*options, "stream_options.").Bool("include_usage"));
  request.include_usage = include_usage.value_or(false);
  return absl::OkStatus();
}

// Reads a float parameter within its limit (common/request_limits.h) into a proto setter when present.
template <typename Setter>
absl::Status ReadFloat(const FieldReader& fields, const limits::FloatLimit& limit, Setter set) {
  const std::string_view name(limit.name.data(), limit.name.size());
  ASSIGN_OR_RETURN(const std::optional<double> value, fields.Number(name, limit.min, limit.max));
  if (!value.has_value()) return absl::OkStatus();
  if (!limit.Contains(*value)) {
    return InvalidParameter(name, absl::StrCat("'", limit.name, "' must be ", limit.Describe(), ", got ", *value));
  }
  set(static_cast<float>(*value));
  return absl::OkStatus();
}

absl::Status ParseStop(const FieldReader& fields, v1::SamplingParams& sampling) {
  const json* stop = fields.Find("stop");
  if (stop == nullptr) return absl::OkStatus();
  std::vector<std::string> strings;
  if (stop->is_string()) {
    strings.push_back(stop->get<std::string>());
  } else if (stop->is_array()) {
    if (static_cast<int64_t>(stop->size()) > kMaxStopStrings) {
      return InvalidParameter(
          "stop", absl::StrCat("'stop' may hold at most ", kMaxStopStrings, " strings, got ", stop->size()));
    }
    for (const json& item : *stop) {
      if (!item.is_string()) return fields.WrongType("stop", item, "a string or an array of strings");
      strings.push_back(item.get<std::string>());
    }
  } else {
    return fields.WrongType("stop", *stop, "a string or an array of strings");
  }
  for (std::string& text : strings) {
    if (text.empty()) return InvalidParameter("stop", "'stop' must not contain an empty string");
    if (text.size() > limits::kMaxStopStringBytes) {
      return InvalidParameter("stop", absl::StrCat("each 'stop' string may be at most ", limits::kMaxStopStringBytes,
                                                   " bytes long, got one of ", text.size()));
    }
    sampling.add_stop(std::move(text));
  }
  return absl::OkStatus();
}

absl::Status ParseStopTokenIds(const FieldReader& fields, v1::SamplingParams& sampling) {
  const json* ids = fields.Find("stop_token_ids");
  if (ids == nullptr) return absl::OkStatus();
  if (!ids->is_array()) return fields.WrongType("stop_token_ids", *ids, "an array of token ids");
  if (static_cast<int64_t>(ids->size()) > limits::kMaxStopTokenIds) {
    return InvalidParameter("stop_token_ids", absl::StrCat("'stop_token_ids' may hold at most ",
                                                           limits::kMaxStopTokenIds, " ids, got ", ids->size()));
  }
  for (const json& id : *ids) {
    if (!id.is_number_integer()) return fields.WrongType("stop_token_ids", id, "an array of token ids");
    if (id.is_number_unsigned() ? id.get<uint64_t>() > static_cast<uint64_t>(kMaxTokenId) : id.get<int64_t>() < 0) {
      return InvalidParameter("stop_token_ids",
                              absl::StrCat("'stop_token_ids' holds ", DumpJson(id), ", which is not a token id"));
    }
    sampling.add_stop_token_ids(static_cast<int32_t>(id.get<int64_t>()));
  }
  return absl::OkStatus();
}

absl::Status ParseSeed(const FieldReader& fields, v1::SamplingParams& sampling) {
  const json* seed = fields.Find("seed");
  if (seed == nullptr) return absl::OkStatus();
  if (seed->is_number_unsigned()) {
    sampling.set_seed(seed->get<uint64_t>());
    return absl::OkStatus();
  }
  ASSIGN_OR_RETURN(const std::optional<int64_t> value,
                   fields.Int("seed", std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max()));
  // Negative seeds are legal in vLLM; any fixed bit pattern gives the same determinism.
  sampling.set_seed(static_cast<uint64_t>(*value));
  return absl::OkStatus();
}

absl::Status ParseLengths(const FieldReader& fields, OpenAiKind kind, v1::SamplingParams& sampling) {
  ASSIGN_OR_RETURN(std::optional<int64_t> max_tokens, fields.Int("max_tokens", 1, kMaxTokenCount));
  std::string_view max_name = "max_tokens";
  if (kind == OpenAiKind::kChat) {
    // OpenAI deprecated max_tokens for chat in favour of max_completion_tokens, which wins when both are given.
    ASSIGN_OR_RETURN(const std::optional<int64_t> max_completion_tokens,
                     fields.Int("max_completion_tokens", 1, kMaxTokenCount));
    if (max_completion_tokens.has_value()) {
      max_tokens = max_completion_tokens;
      max_name = "max_completion_tokens";
    }
  }
  if (max_tokens.has_value()) sampling.set_max_tokens(static_cast<uint32_t>(*max_tokens));
  ASSIGN_OR_RETURN(const std::optional<int64_t> min_tokens, fields.Int("min_tokens", 0, kMaxTokenCount));
  if (min_tokens.has_value()) {
    if (max_tokens.has_value() && *min_tokens > *max_tokens) {
      return InvalidParameter("min_tokens", absl::StrCat("'min_tokens' (", *min_tokens, ") must not exceed '",
                                                         std::string(max_name), "' (", *max_tokens, ")"));
    }
    sampling.set_min_tokens(static_cast<uint32_t>(*min_tokens));
  }
  return absl::OkStatus();
}

absl::Status ParseChoices(const FieldReader& fields, v1::SamplingParams& sampling) {
  const json* given = fields.Find("n");
  if (given == nullptr) return absl::OkStatus();
  const absl::StatusOr<std::optional<int64_t>> n = fields.Int("n", 1, kMaxChoices);
  if (!n.ok()) {
    if (!given->is_number()) return n.status();
    return InvalidParameter("n", absl::StrCat("'n' must be between 1 and ", kMaxChoices, ", got ", DumpJson(*given),
                                              " (this server returns at most ", kMaxChoices, " choices per request)"));
  }
  sampling.set_n(static_cast<uint32_t>(**n));
  return absl::OkStatus();
}

absl::Status ParseSampling(const FieldReader& fields, OpenAiKind kind, v1::SamplingParams& sampling) {
  RETURN_IF_ERROR(ParseLengths(fields, kind, sampling));
  RETURN_IF_ERROR(ParseChoices(fields, sampling));
  RETURN_IF_ERROR(ReadFloat(fields, limits::kTemperature, [&](float v) { sampling.set_temperature(v); }));
  RETURN_IF_ERROR(ReadFloat(fields, limits::kTopP, [&](float v) { sampling.set_top_p(v); }));
  ASSIGN_OR_RETURN(const std::optional<int64_t> top_k,
                   fields.Int("top_k", limits::kMinTopK, std::numeric_limits<int32_t>::max()));
  if (top_k.has_value()) sampling.set_top_k(static_cast<int32_t>(*top_k));
  RETURN_IF_ERROR(ReadFloat(fields, limits::kMinP, [&](float v) { sampling.set_min_p(v); }));
  RETURN_IF_ERROR(ReadFloat(fields, limits::kPresencePenalty, [&](float v) { sampling.set_presence_penalty(v); }));
  RETURN_IF_ERROR(ReadFloat(fields, limits::kFrequencyPenalty, [&](float v) { sampling.set_frequency_penalty(v); }));
  RETURN_IF_ERROR(ReadFloat(fields, limits::kRepetitionPenalty, [&](float v) { sampling.set_repetition_penalty(v); }));
  RETURN_IF_ERROR(ParseSeed(fields, sampling));
  RETURN_IF_ERROR(ParseStop(fields, sampling));
  RETURN_IF_ERROR(ParseStopTokenIds(fields, sampling));
  ASSIGN_OR_RETURN(const std::optional<bool> ignore_eos, fields.Bool("ignore_eos"));
  sampling.set_ignore_eos(ignore_eos.value_or(false));
  ASSIGN_OR_RETURN(const std::optional<bool> skip_special_tokens, fields.Bool("skip_special_tokens"));
  if (skip_special_tokens.has_value()) sampling.set_skip_special_tokens(*skip_special_tokens);
  ASSIGN_OR_RETURN(const std::optional<bool> include_stop, fields.Bool("include_stop_str_in_output"));
  sampling.set_include_stop_str_in_output(include_stop.value_or(false));
  return absl::OkStatus();
}

// vLLM's early_stopping: false, true or "never".
absl::StatusOr<v1::BeamEarlyStopping> ParseEarlyStopping(const FieldReader& fields) {
  const json* value = fields.Find("early_stopping");
  if (value == nullptr) return v1::BEAM_EARLY_STOPPING_HEURISTIC;
  if (value->is_boolean()) {
    return value->get<bool>() ? v1::BEAM_EARLY_STOPPING_WHEN_FULL : v1::BEAM_EARLY_STOPPING_HEURISTIC;
  }
  if (value->is_string() && value->get<std::string>() == "never") return v1::BEAM_EARLY_STOPPING_NEVER;
  return InvalidParameter("early_stopping",
                          absl::StrCat("'early_stopping' must be true, false or \"never\", got ", DumpJson(*value)));
}

// Beam search follows the most likely continuations: it samples nothing, so sampling parameters are refused and
// an absent temperature becomes 0.
absl::Status RequireGreedyForBeamSearch(v1::SamplingParams& sampling) {
  const std::optional<limits::BeamSearchConflict> conflict = limits::FindBeamSearchConflict(
      sampling.has_temperature() ? sampling.temperature() : 0, sampling.has_top_p() ? sampling.top_p() : 1,
      sampling.has_top_k() ? sampling.top_k() : 0, sampling.has_min_p() ? sampling.min_p() : 0);
  if (conflict.has_value()) {
    return InvalidParameter(
        conflict->name, absl::StrCat("beam search does not sample: '", conflict->name, "' must be ", conflict->allowed,
                                     " or absent with 'use_beam_search', got ", conflict->value));
  }
  sampling.set_temperature(0);
  return absl::OkStatus();
}

// vLLM's use_beam_search, length_penalty and early_stopping. The beam width is best_of, or n without it; the
// worker returns the n best beams, ranked, together at the end.
absl::Status ParseBeamSearch(const FieldReader& fields, OpenAiRequest& request) {
  ASSIGN_OR_RETURN(const std::optional<bool> use_beam_search, fields.Bool("use_beam_search"));
  std::optional<float> length_penalty;
  RETURN_IF_ERROR(ReadFloat(fields, limits::kLengthPenalty, [&](float v) { length_penalty = v; }));
  ASSIGN_OR_RETURN(const v1::BeamEarlyStopping early_stopping, ParseEarlyStopping(fields));
  if (!use_beam_search.value_or(false)) {
    if (length_penalty.has_value() && *length_penalty != 1) {
      return InvalidParameter("length_penalty", "'length_penalty' applies only with 'use_beam_search': true");
    }
    if (early_stopping != v1::BEAM_EARLY_STOPPING_HEURISTIC) {
      return InvalidParameter("early_stopping",
                              "'early_stopping' applies only with 'use_beam_search': true; without it, it must be "
                              "false or absent");
    }
    return absl::OkStatus();
  }
  if (request.stream) {
    return InvalidParameter("stream", "beam search returns its beams together at the end: 'stream' must be false");
  }
  ASSIGN_OR_RETURN(const std::optional<int64_t> best_of, fields.Int("best_of", 1, kMaxChoices));
  const uint32_t n = request.num_choices();
  const int64_t width = best_of.value_or(n);
  if (width < limits::kMinBeamWidth) {
    return InvalidParameter(best_of.has_value() ? "best_of" : "n",
                            absl::StrCat("best_of must be greater than 1 when using beam search (the beam width is "
                                         "'best_of', or 'n' when 'best_of' is absent), got ",
                                         width));
  }
  if (width < n) {
    return InvalidParameter("best_of", absl::StrCat("'best_of' (", width, ") must be at least 'n' (", n,
                                                    "): beam search returns the n best of its best_of beams"));
  }
  v1::SamplingParams& sampling = *request.generate.mutable_sampling();
  RETURN_IF_ERROR(RequireGreedyForBeamSearch(sampling));
  sampling.set_beam_width(static_cast<uint32_t>(width));
  if (length_penalty.has_value()) sampling.set_length_penalty(*length_penalty);
  sampling.set_early_stopping(early_stopping);
  return absl::OkStatus();
}

// Parameters with a meaning this server does not implement: refusing beats silently ignoring them.
absl::Status RejectUnsupported(const FieldReader& fields, OpenAiKind kind, uint32_t num_choices, bool beam_search) {
  if (kind == OpenAiKind::kChat) {
    // Chat has no best_of in OpenAI's API; one that asks for more than n choices is refused, not ignored. With
    // beam search it is the beam width (ParseBeamSearch).
    ASSIGN_OR_RETURN(const std::optional<int64_t> best_of, fields.Int("best_of", 1, kMaxChoices));
    if (best_of.has_value() && *best_of != num_choices && !beam_search) {
      return InvalidParameter("best_of",
                              "'best_of' is supported only by /v1/completions, or with 'use_beam_search'; in "
                              "another chat request it must equal 'n'");
    }
    return absl::OkStatus();
  }
  ASSIGN_OR_RETURN(const std::optional<std::string> suffix, fields.String("suffix"));
  if (suffix.has_value() && !suffix->empty()) {
    return InvalidParameter("suffix", "'suffix' is not supported by this server");
  }
  return absl::OkStatus();
}

absl::Status ParseCommon(const json& body, OrderedBody& ordered, OpenAiKind kind, OpenAiRequest& request) {
  const FieldReader fields(body);
  request.kind = kind;
  RETURN_IF_ERROR(ParseModel(fields, request));
  RETURN_IF_ERROR(ParseStreaming(fields, request));
  RETURN_IF_ERROR(ParseSampling(fields, kind, *request.generate.mutable_sampling()));
  RETURN_IF_ERROR(ParseBeamSearch(fields, request));
  RETURN_IF_ERROR(ParseStructuredOutput(body, ordered, *request.generate.mutable_sampling()));
  RETURN_IF_ERROR(RejectUnsupported(fields, kind, request.num_choices(), request.beam_search()));
  ASSIGN_OR_RETURN(std::optional<std::string> user, fields.String("user"));
  if (user.has_value()) request.generate.set_user(*std::move(user));
  // vLLM's cache_salt: only requests with the same salt share prefix-cache blocks (and routing by prefix).
  ASSIGN_OR_RETURN(std::optional<std::string> cache_salt, fields.String("cache_salt"));
  if (cache_salt.has_value()) {
    if (cache_salt->empty()) return InvalidParameter("cache_salt", "'cache_salt' must be a non-empty string");
    if (cache_salt->size() > limits::kMaxCacheSaltBytes) {
      return InvalidParameter("cache_salt", absl::StrCat("'cache_salt' may be at most ", limits::kMaxCacheSaltBytes,
                                                         " bytes long, got ", cache_salt->size()));
    }
    request.generate.set_cache_salt(*std::move(cache_salt));
  }
  ASSIGN_OR_RETURN(const std::optional<bool> add_special_tokens, fields.Bool("add_special_tokens"));
  if (add_special_tokens.has_value()) request.generate.set_add_special_tokens(*add_special_tokens);
  return absl::OkStatus();
}

// --- chat ---

absl::Status ParseChatLogprobs(const FieldReader& fields, OpenAiRequest& request) {
  ASSIGN_OR_RETURN(const std::optional<bool> logprobs, fields.Bool("logprobs"));
  ASSIGN_OR_RETURN(const std::optional<int64_t> top_logprobs, fields.Int("top_logprobs", 0, limits::kMaxTopLogprobs));
  request.logprobs = logprobs.value_or(false);
  request.top_logprobs = static_cast<uint32_t>(top_logprobs.value_or(0));
  if (request.top_logprobs > 0 && !request.logprobs) {
    return InvalidParameter("top_logprobs", "'top_logprobs' needs 'logprobs' to be true");
  }
  request.generate.mutable_sampling()->set_logprobs(request.logprobs);
  request.generate.mutable_sampling()->set_top_logprobs(request.top_logprobs);
  return absl::OkStatus();
}

// --- completions ---

// One prompt of the request: text or token ids, into `generate`'s input.
absl::Status SetPromptInput(const json& prompt, std::string_view param, v1::GenerateRequest& generate) {
  if (prompt.is_string()) {
    generate.set_prompt(prompt.get<std::string>());
    return absl::OkStatus();
  }
  ASSIGN_OR_RETURN(const std::vector<int32_t> ids, ReadTokenIds(prompt, param));
  generate.mutable_prompt_token_ids()->mutable_ids()->Add(ids.begin(), ids.end());
  return absl::OkStatus();
}

absl::Status ParsePrompt(const FieldReader& fields, OpenAiRequest& request) {
  const json* prompt = fields.Find("prompt");
  if (prompt == nullptr) return InvalidParameter("prompt", "'prompt' is required");
  const std::string_view expected = "a string, an array of token ids, or an array of strings or of token-id arrays";
  if (prompt->is_string()) return SetPromptInput(*prompt, "prompt", request.generate);
  if (!prompt->is_array()) return fields.WrongType("prompt", *prompt, expected);
  if (prompt->empty()) return InvalidParameter("prompt", "'prompt' must not be an empty array");
  const json& first = prompt->front();
  if (first.is_number()) return SetPromptInput(*prompt, "prompt", request.generate);
  if (!first.is_string() && !first.is_array()) return fields.WrongType("prompt", first, expected);
  for (const json& item : *prompt) {
    if (item.type() != first.type()) return fields.WrongType("prompt", *prompt, expected);
  }
  if (static_cast<int64_t>(prompt->size()) > limits::kMaxPrompts) {
    return InvalidParameter(
        "prompt", absl::StrCat("'prompt' may hold at most ", limits::kMaxPrompts, " prompts, got ", prompt->size()));
  }
  // Beam search runs best_of beams per prompt, though only n of them come back.
  const uint32_t per_prompt = request.beam_search() ? request.generate.sampling().beam_width() : request.num_choices();
  if (static_cast<int64_t>(prompt->size() * per_prompt) > limits::kMaxTotalChoices) {
    return InvalidParameter("prompt", absl::StrCat(prompt->size(), " prompts with ",
                                                   request.beam_search() ? "a beam width of " : "n=", per_prompt,
                                                   " make more than ", limits::kMaxTotalChoices, " choices"));
  }
  // Every prompt's request carries its own copy of the structured-output constraint and token restrictions.
  const v1::SamplingParams& sampling = request.generate.sampling();
  const size_t restriction_bytes =
      sampling.constraint().ByteSizeLong() + 8 * sampling.logit_bias_size() + 4 * sampling.allowed_token_ids_size();
  size_t bad_word_bytes = 0;
  for (const std::string& word : sampling.bad_words()) bad_word_bytes += word.size();
  if ((restriction_bytes + bad_word_bytes) * prompt->size() > limits::kMaxRestrictionBytesPerRequest) {
    return InvalidParameter("prompt",
                            absl::StrCat(prompt->size(), " prompts each with ", restriction_bytes + bad_word_bytes,
                                         " bytes of structured-output constraint and token restrictions "
                                         "make more than ",
                                         limits::kMaxRestrictionBytesPerRequest, " bytes in all"));
  }
  RETURN_IF_ERROR(SetPromptInput(first, "prompt[0]", request.generate));
  for (size_t i = 1; i < prompt->size(); ++i) {
    v1::GenerateRequest further = request.generate;
    further.clear_input();
    RETURN_IF_ERROR(SetPromptInput((*prompt)[i], absl::StrCat("prompt[", i, "]"), further));
    request.further_prompts.push_back(std::move(further));
  }
  return absl::OkStatus();
}

// Applies `change` to the sampling of every prompt's generation.
template <typename Change>
void ForEachSampling(OpenAiRequest& request, Change change) {
  change(*request.generate.mutable_sampling());
  for (v1::GenerateRequest& further : request.further_prompts) change(*further.mutable_sampling());
}

absl::Status ParseCompletionOptions(const FieldReader& fields, OpenAiRequest& request) {
  ASSIGN_OR_RETURN(const std::optional<int64_t> logprobs, fields.Int("logprobs", 0, kMaxCompletionLogprobs));
  if (logprobs.has_value()) {
    // The completions `logprobs` is the number of alternatives per token; the sampled token always comes too.
    request.logprobs = true;
    request.top_logprobs = static_cast<uint32_t>(*logprobs);
    ForEachSampling(request, [&request](v1::SamplingParams& sampling) {
      sampling.set_logprobs(true);
      sampling.set_top_logprobs(request.top_logprobs);
    });
  }
  ASSIGN_OR_RETURN(const std::optional<bool> echo, fields.Bool("echo"));
  request.echo = echo.value_or(false);
  if (request.echo) {
    if (!request.generate.has_prompt()) {
      return InvalidParameter("echo", "'echo' is not supported with a token-id prompt; send the prompt as text");
    }
    request.echo_texts.push_back(request.generate.prompt());
    for (const v1::GenerateRequest& further : request.further_prompts) request.echo_texts.push_back(further.prompt());
  }
  return absl::OkStatus();
}

// vLLM's return_tokens_as_token_ids and prompt_logprobs, and echo with logprobs: the worker returns the prompt's
// logprobs with as many alternatives as either asks for.
absl::Status ParsePromptLogprobs(const FieldReader& fields, OpenAiRequest& request) {
  ASSIGN_OR_RETURN(const std::optional<bool> tokens_as_ids, fields.Bool("return_tokens_as_token_ids"));
  request.tokens_as_ids = tokens_as_ids.value_or(false);
  ASSIGN_OR_RETURN(const std::optional<int64_t> prompt_logprobs,
                   fields.Int("prompt_logprobs", 0, limits::kMaxTopLogprobs));
  if (prompt_logprobs.has_value()) {
    if (request.stream) {
      return InvalidParameter("prompt_logprobs", "'prompt_logprobs' is not available with 'stream': true");
    }
    request.prompt_logprobs = static_cast<uint32_t>(*prompt_logprobs);
  }
  std::optional<uint32_t> alternatives = request.prompt_logprobs;
  if (request.echo && request.logprobs) alternatives = std::max(alternatives.value_or(0), request.top_logprobs);
  if (alternatives.has_value() && request.beam_search()) {
    if (request.prompt_logprobs.has_value()) {
      return InvalidParameter("prompt_logprobs", "'prompt_logprobs' is not available with 'use_beam_search': true");
    }
    return InvalidParameter("echo",
                            "'echo' with 'logprobs' asks for the prompt's logprobs, which are not available with "
                            "'use_beam_search': true");
  }
  if (alternatives.has_value()) {
    ForEachSampling(request,
                    [&alternatives](v1::SamplingParams& sampling) { sampling.set_prompt_logprobs(*alternatives); });
  }
  return absl::OkStatus();
}

}  // namespace

// best_of > n: each prompt generates best_of choices (the worker's n), with logprobs to rank them, and the
// answer keeps the n with the highest cumulative logprob.
absl::Status ParseBestOf(const FieldReader& fields, OpenAiRequest& request) {
  if (request.beam_search()) return absl::OkStatus();  // best_of is the beam width, and the worker ranks the beams
  ASSIGN_OR_RETURN(const std::optional<int64_t> best_of, fields.Int("best_of", 1, kMaxChoices));
  const uint32_t n = request.num_choices();
  if (!best_of.has_value() || *best_of == n) return absl::OkStatus();
  if (*best_of < n) {
    return InvalidParameter("best_of", absl::StrCat("'best_of' (", *best_of, ") must be at least 'n' (", n, ")"));
  }
  if (request.stream) {
    return InvalidParameter("best_of",
                            "'best_of' must equal 'n' when streaming: the best choices are known only at "
                            "the end");
  }
  if (static_cast<int64_t>(request.num_prompts()) * *best_of > limits::kMaxTotalChoices) {
    return InvalidParameter("best_of", absl::StrCat(request.num_prompts(), " prompts with best_of=", *best_of,
                                                    " make more than ", limits::kMaxTotalChoices, " choices"));
  }
  request.best_of_n = n;
  ForEachSampling(request, [&best_of](v1::SamplingParams& sampling) {
    sampling.set_n(static_cast<uint32_t>(*best_of));
    sampling.set_logprobs(true);
  });
  return absl::OkStatus();
}

absl::StatusOr<OpenAiRequest> ParseChatCompletionRequest(std::string_view body) {
  ASSIGN_OR_RETURN(const json parsed, ParseRequestBody(body));
  OpenAiRequest request;
  OrderedBody ordered(body);
  RETURN_IF_ERROR(ParseCommon(parsed, ordered, OpenAiKind::kChat, request));
  // The client's key order, which the chat template's tojson shows the model.
  RETURN_IF_ERROR(ParseChatInput(parsed, ordered.Get(), *request.generate.mutable_chat(), &request.tool_positions));
  ASSIGN_OR_RETURN(const std::optional<bool> include_reasoning, FieldReader(parsed).Bool("include_reasoning"));
  request.include_reasoning = include_reasoning.value_or(true);
  RETURN_IF_ERROR(ParseChatLogprobs(FieldReader(parsed), request));
  RETURN_IF_ERROR(ParsePromptLogprobs(FieldReader(parsed), request));
  return request;
}

absl::StatusOr<OpenAiRequest> ParseCompletionRequest(std::string_view body) {
  ASSIGN_OR_RETURN(const json parsed, ParseRequestBody(body));
  OpenAiRequest request;
  OrderedBody ordered(body);
  RETURN_IF_ERROR(ParseCommon(parsed, ordered, OpenAiKind::kCompletion, request));
  const FieldReader fields(parsed);
  RETURN_IF_ERROR(ParsePrompt(fields, request));
  RETURN_IF_ERROR(ParseCompletionOptions(fields, request));
  RETURN_IF_ERROR(ParseBestOf(fields, request));
  RETURN_IF_ERROR(ParsePromptLogprobs(fields, request));
  return request;
}

}  // namespace llmc::gateway
