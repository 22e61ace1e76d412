#include "gateway/openai/openai_logprobs.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <string>

namespace llmc::gateway {
namespace {

using nlohmann::ordered_json;

// vLLM's stand-in for -inf, which JSON cannot carry.
constexpr double kMinLogprob = -9999.0;

// The worker's logprobs are floats; widening -0.1f naively prints -0.10000000149011612. Going through the
// shortest decimal form of the float prints -0.1 and reads back as the same float.
double LogprobValue(float logprob) {
  if (!std::isfinite(logprob)) return kMinLogprob;
  char buffer[32];
  const std::to_chars_result result = std::to_chars(buffer, buffer + sizeof(buffer) - 1, logprob);
  if (result.ec != std::errc()) return logprob;
  *result.ptr = '\0';
  return std::strtod(buffer, nullptr);
}

ordered_json Bytes(const std::string& bytes) {
  ordered_json out = ordered_json::array();
  for (const char byte : bytes) out.push_back(static_cast<int>(static_cast<unsigned char>(byte)));
  return out;
}

// The token as the answer names it: its text, or "token_id:<id>" (vLLM's return_tokens_as_token_ids).
template <typename Entry>
std::string Named(const Entry& entry, bool tokens_as_ids) {
  return tokens_as_ids ? "token_id:" + std::to_string(entry.token_id()) : entry.token();
}

template <typename Entry>
ordered_json ChatEntry(const Entry& entry, bool tokens_as_ids) {
  ordered_json out;
  out["token"] = Named(entry, tokens_as_ids);
  out["logprob"] = LogprobValue(entry.logprob());
  out["bytes"] = Bytes(entry.token_bytes());
  return out;
}

}  // namespace

void AppendCompletionTokenLogprob(const v1::TokenLogprob& token, size_t max_alternatives, bool tokens_as_ids,
                                  uint64_t& text_offset, ordered_json& out) {
  out["tokens"].push_back(Named(token, tokens_as_ids));
  out["token_logprobs"].push_back(LogprobValue(token.logprob()));
  // Alternatives best first, then the token itself if it is not among them. Distinct ids can share a text
  // (partial UTF-8 renders as U+FFFD); the first, most likely one keeps the key.
  ordered_json top = ordered_json::object();
  const size_t count = std::min<size_t>(max_alternatives, token.top_size());
  for (size_t i = 0; i < count; ++i) {
    const v1::TopLogprob& alternative = token.top(static_cast<int>(i));
    const std::string name = Named(alternative, tokens_as_ids);
    if (!top.contains(name)) top[name] = LogprobValue(alternative.logprob());
  }
  if (const std::string name = Named(token, tokens_as_ids); !top.contains(name))
    top[name] = LogprobValue(token.logprob());
  out["top_logprobs"].push_back(std::move(top));
  out["text_offset"].push_back(text_offset);
  text_offset += CountCodePoints(token.token());
}

uint64_t CountCodePoints(const std::string& text) {
  uint64_t count = 0;
  for (const char byte : text) count += (static_cast<unsigned char>(byte) & 0xC0) != 0x80;
  return count;
}

void AppendChatLogprobs(const TokenLogprobs& logprobs, bool tokens_as_ids, ordered_json& content) {
  for (const v1::TokenLogprob& token : logprobs) {
    ordered_json entry = ChatEntry(token, tokens_as_ids);
    ordered_json top = ordered_json::array();
    for (const v1::TopLogprob& alternative : token.top()) top.push_back(ChatEntry(alternative, tokens_as_ids));
    entry["top_logprobs"] = std::move(top);
    content.push_back(std::move(entry));
  }
}

ordered_json EmptyCompletionLogprobs() {
  ordered_json out;
  out["tokens"] = ordered_json::array();
  out["token_logprobs"] = ordered_json::array();
  out["top_logprobs"] = ordered_json::array();
  out["text_offset"] = ordered_json::array();
  return out;
}

void AppendCompletionLogprobs(const TokenLogprobs& logprobs, bool tokens_as_ids, uint64_t& text_offset,
                              ordered_json& out) {
  for (const v1::TokenLogprob& token : logprobs) {
    AppendCompletionTokenLogprob(token, token.top_size(), tokens_as_ids, text_offset, out);
  }
}

void AppendCompletionPromptLogprobs(const TokenLogprobs& prompt, uint32_t alternatives, bool tokens_as_ids,
                                    uint64_t& text_offset, ordered_json& out) {
  for (int i = 0; i < prompt.size(); ++i) {
    if (i > 0) {
      AppendCompletionTokenLogprob(prompt[i], alternatives, tokens_as_ids, text_offset, out);
      continue;
    }
    // Nothing predicts the first token.
    out["tokens"].push_back(Named(prompt[0], tokens_as_ids));
    out["token_logprobs"].push_back(nullptr);
    out["top_logprobs"].push_back(nullptr);
    out["text_offset"].push_back(text_offset);
    text_offset += CountCodePoints(prompt[0].token());
  }
}

ordered_json VllmPromptLogprobsPosition(const v1::TokenLogprob& token, uint32_t alternatives) {
  const auto entry = [](float logprob, uint32_t rank, const std::string& text) {
    return ordered_json{{"logprob", LogprobValue(logprob)}, {"rank", rank}, {"decoded_token", text}};
  };
  // The token itself first, then the alternatives not already there, as vLLM lists them.
  ordered_json position = ordered_json::object();
  position[std::to_string(token.token_id())] = entry(token.logprob(), token.rank(), token.token());
  const size_t count = std::min<size_t>(alternatives, token.top_size());
  for (size_t k = 0; k < count; ++k) {
    const v1::TopLogprob& alternative = token.top(static_cast<int>(k));
    const std::string key = std::to_string(alternative.token_id());
    if (!position.contains(key)) {
      position[key] = entry(alternative.logprob(), static_cast<uint32_t>(k + 1), alternative.token());
    }
  }
  return position;
}

ordered_json VllmPromptLogprobs(const TokenLogprobs& prompt, uint32_t alternatives) {
  ordered_json out = ordered_json::array();
  for (int i = 0; i < prompt.size(); ++i) {
    out.push_back(i == 0 ? ordered_json(nullptr) : VllmPromptLogprobsPosition(prompt[i], alternatives));
  }
  return out;
}

}  // namespace llmc::gateway
