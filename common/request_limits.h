#ifndef LLMC_COMMON_REQUEST_LIMITS_H_
#define LLMC_COMMON_REQUEST_LIMITS_H_

#include <cfloat>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

// The limits of a generation request's parameters, in one table: the gateway checks the OpenAI request
// against them (HTTP 400 naming the parameter) and the worker checks v1.SamplingParams against the same
// values (INVALID_ARGUMENT), so a request direct over gRPC and one through the gateway meet one set of rules.
namespace llmc::limits {

// The range of a float parameter. NaN is in no range.
struct FloatLimit {
  absl::string_view name;  // as OpenAI and v1.SamplingParams spell it
  double min = 0;
  double max = 0;
  bool min_exclusive = false;

  constexpr bool Contains(double value) const { return (min_exclusive ? value > min : value >= min) && value <= max; }
  // "in [0, 2]", "in (0, 1]", or "greater than 0" when there is no useful upper bound.
  std::string Describe() const {
    if (max >= FLT_MAX) return absl::StrCat(min_exclusive ? "greater than " : "at least ", min);
    return absl::StrCat("in ", min_exclusive ? "(" : "[", min, ", ", max, "]");
  }
};

inline constexpr FloatLimit kTemperature{"temperature", 0, 2};
inline constexpr FloatLimit kTopP{"top_p", 0, 1, /*min_exclusive=*/true};
inline constexpr FloatLimit kMinP{"min_p", 0, 1};
inline constexpr FloatLimit kPresencePenalty{"presence_penalty", -2, 2};
inline constexpr FloatLimit kFrequencyPenalty{"frequency_penalty", -2, 2};
inline constexpr FloatLimit kLengthPenalty{"length_penalty", -10, 10};
inline constexpr FloatLimit kRepetitionPenalty{"repetition_penalty", 0, FLT_MAX, /*min_exclusive=*/true};
inline constexpr FloatLimit kLogitBias{"logit_bias", -100, 100};  // each entry's value

inline constexpr int64_t kMinTopK = -1;  // -1 (or 0) disables top-k

// Beam search follows the most likely continuations and samples nothing: temperature, top_p, top_k and min_p
// must keep the values that leave the distribution alone (an absent one reads as that value). The first
// that does not, with the values allowed, or nullopt.
struct BeamSearchConflict {
  const char* name;
  const char* allowed;
  double value = 0;
};
inline std::optional<BeamSearchConflict> FindBeamSearchConflict(double temperature, double top_p, int64_t top_k,
                                                                double min_p) {
  if (temperature != 0) return BeamSearchConflict{"temperature", "0", temperature};
  if (top_p != 1) return BeamSearchConflict{"top_p", "1", top_p};
  if (top_k > 0) return BeamSearchConflict{"top_k", "-1 or 0", static_cast<double>(top_k)};
  if (min_p != 0) return BeamSearchConflict{"min_p", "0", min_p};
  return std::nullopt;
}
inline constexpr int64_t kMaxChoices = 16;            // n, and best_of (the beam width of beam search)
inline constexpr int64_t kMinBeamWidth = 2;           // beam search needs at least two beams
inline constexpr int64_t kMaxStopStrings = 16;        // entries of stop
inline constexpr int64_t kMaxPrompts = 256;           // entries of a completions `prompt` list
inline constexpr int64_t kMaxTotalChoices = 1024;     // prompts × n in one completions request
inline constexpr int64_t kMaxTopLogprobs = 20;        // chat's top_logprobs, and what a worker returns
inline constexpr int64_t kMaxCompletionLogprobs = 5;  // the legacy completions API's logprobs (OpenAI's bound)
// Each stop string's bytes (UTF-8), and the entries of stop_token_ids. OpenAI allows 4 stop strings and no
// stop_token_ids; vLLM bounds neither. Real stops are markers ("</answer>", "\n\nUser:", a template's end
// tag) of tens of bytes, and a model has a handful of end ids; the caps bound what the engine holds back
// and scans per token (stop_string_matcher.h) far above that.
inline constexpr size_t kMaxStopStringBytes = 512;
inline constexpr int64_t kMaxStopTokenIds = 64;
// Structured outputs and token restrictions. Multi-prompt completions copy them into every prompt's request.
inline constexpr size_t kMaxConstraintTextBytes = 256 << 10;  // a JSON schema (compact), regex or grammar
inline constexpr int64_t kMaxChoiceStrings = 1024;            // entries of a `choice` constraint
inline constexpr size_t kMaxChoiceStringBytes = 4 << 10;      // each of them
inline constexpr int64_t kMaxLogitBiasEntries = 300;          // OpenAI's bound
// allowed_token_ids: the largest vocabularies in use (Gemma's 262,144 tokens); a longer list must repeat ids.
inline constexpr int64_t kMaxAllowedTokenIds = 1 << 18;
inline constexpr int64_t kMaxBadWords = 1024;
inline constexpr size_t kMaxBadWordBytes = 1 << 10;
// A completions prompt list copies those into every prompt's request: their bytes times the prompts, at most.
inline constexpr size_t kMaxRestrictionBytesPerRequest = 16 << 20;
// vLLM's cache_salt: a client's, and what a worker accepts (the client's plus the gateway's per-API-key part).
inline constexpr size_t kMaxCacheSaltBytes = 256;
inline constexpr size_t kMaxWorkerCacheSaltBytes = 512;
// The shape of a request body's JSON: deeper nesting would make copying and printing it recurse that deep,
// more keys in one object would make the order-keeping parse quadratic.
inline constexpr size_t kMaxJsonDepth = 64;
inline constexpr uint32_t kMaxJsonObjectKeys = 10000;
// A chat's messages as the gateway forwards them: a tool call's arguments, sent as a JSON string and held to
// kMaxJsonDepth there, become an object five levels down (list, message, tool_calls, call, function).
inline constexpr size_t kMaxMessagesJsonDepth = kMaxJsonDepth + 5;

}  // namespace llmc::limits

#endif  // LLMC_COMMON_REQUEST_LIMITS_H_
