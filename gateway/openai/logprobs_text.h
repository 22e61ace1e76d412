#ifndef LLMC_GATEWAY_OPENAI_LOGPROBS_TEXT_H_
#define LLMC_GATEWAY_OPENAI_LOGPROBS_TEXT_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "gateway/openai/openai_logprobs.h"

namespace llmc::gateway {

// A non-streamed answer's logprobs, kept as the JSON text they will be in the body rather than as
// nlohmann::json trees (which take some 30 times the bytes of their text: 16 choices with 20 alternatives a
// token made hundreds of MB of trees). Each holds the entries of JSON arrays, comma-separated, without the
// brackets; the text is what openai_logprobs.h's functions build.

// Chat: the entries of `logprobs.content`.
class ChatLogprobsText {
 public:
  void Append(const TokenLogprobs& logprobs, bool tokens_as_ids);
  // "[...]".
  void AppendArrayTo(std::string& out) const;
  size_t bytes() const { return entries_.size(); }

 private:
  std::string entries_;
};

// Completions: the entries of the four arrays {"tokens","token_logprobs","top_logprobs","text_offset"}.
class CompletionLogprobsText {
 public:
  // As AppendCompletionLogprobs, which advances `text_offset`.
  void Append(const TokenLogprobs& logprobs, bool tokens_as_ids, uint64_t& text_offset);
  // As AppendCompletionPromptLogprobs.
  void AppendPrompt(const TokenLogprobs& prompt, uint32_t alternatives, bool tokens_as_ids, uint64_t& text_offset);
  // {"tokens":[...],...}: `prefix`'s entries (a prompt's, for echo) then these.
  void AppendObjectTo(std::string& out, const CompletionLogprobsText* prefix = nullptr) const;
  size_t bytes() const { return tokens_.size() + token_logprobs_.size() + top_logprobs_.size() + text_offset_.size(); }

 private:
  // Moves the entries of `json`'s four arrays onto the texts.
  void Take(const nlohmann::ordered_json& json);

  std::string tokens_;
  std::string token_logprobs_;
  std::string top_logprobs_;
  std::string text_offset_;
};

// VllmPromptLogprobs as JSON text, built a position at a time.
std::string VllmPromptLogprobsText(const TokenLogprobs& prompt, uint32_t alternatives);

}  // namespace llmc::gateway

#endif  // LLMC_GATEWAY_OPENAI_LOGPROBS_TEXT_H_
