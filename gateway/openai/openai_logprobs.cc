#include "gateway/openai/openai_logprobs.h"

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

template <typename Entry>
ordered_json ChatEntry(const Entry& entry) {
  ordered_json out;
  out["token"] = entry.token();
  out["logprob"] = LogprobValue(entry.logprob());
  out["bytes"] = Bytes(entry.token_bytes());
  return out;
}

}  // namespace

uint64_t CountCodePoints(const std::string& text) {
  uint64_t count = 0;
  for (const char byte : text) count += (static_cast<unsigned char>(byte) & 0xC0) != 0x80;
  return count;
}

void AppendChatLogprobs(const TokenLogprobs& logprobs, ordered_json& content) {
  for (const v1::TokenLogprob& token : logprobs) {
    ordered_json entry = ChatEntry(token);
    ordered_json top = ordered_json::array();
    for (const v1::TopLogprob& alternative : token.top()) top.push_back(ChatEntry(alternative));
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

void AppendCompletionLogprobs(const TokenLogprobs& logprobs, uint64_t& text_offset, ordered_json& out) {
  for (const v1::TokenLogprob& token : logprobs) {
    out["tokens"].push_back(token.token());
    out["token_logprobs"].push_back(LogprobValue(token.logprob()));
    // Alternatives best first, then the sampled token if it is not among them. Distinct ids can share a text
    // (partial UTF-8 renders as U+FFFD); the first, most likely one keeps the key.
    ordered_json top = ordered_json::object();
    for (const v1::TopLogprob& alternative : token.top()) {
      if (!top.contains(alternative.token())) top[alternative.token()] = LogprobValue(alternative.logprob());
    }
    if (!top.contains(token.token())) top[token.token()] = LogprobValue(token.logprob());
    out["top_logprobs"].push_back(std::move(top));
    out["text_offset"].push_back(text_offset);
    text_offset += CountCodePoints(token.token());
  }
}

}  // namespace llmc::gateway
