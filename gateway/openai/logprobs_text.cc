#include "gateway/openai/logprobs_text.h"

#include "gateway/openai/json_fields.h"

namespace llmc::gateway {
namespace {

using nlohmann::ordered_json;

void AppendEntries(const ordered_json& array, std::string& entries) {
  for (const ordered_json& entry : array) {
    if (!entries.empty()) entries += ',';
    entries += DumpJson(entry);
  }
}

// `first` then `second`, comma-separated, inside brackets.
void AppendJoined(const std::string* first, const std::string& second, std::string& out) {
  out += '[';
  if (first != nullptr) out += *first;
  if (first != nullptr && !first->empty() && !second.empty()) out += ',';
  out += second;
  out += ']';
}

}  // namespace

void ChatLogprobsText::Append(const TokenLogprobs& logprobs, bool tokens_as_ids) {
  if (logprobs.empty()) return;
  ordered_json content = ordered_json::array();
  AppendChatLogprobs(logprobs, tokens_as_ids, content);
  AppendEntries(content, entries_);
}

void ChatLogprobsText::AppendArrayTo(std::string& out) const { AppendJoined(nullptr, entries_, out); }

void CompletionLogprobsText::Take(const ordered_json& json) {
  AppendEntries(json["tokens"], tokens_);
  AppendEntries(json["token_logprobs"], token_logprobs_);
  AppendEntries(json["top_logprobs"], top_logprobs_);
  AppendEntries(json["text_offset"], text_offset_);
}

void CompletionLogprobsText::Append(const TokenLogprobs& logprobs, bool tokens_as_ids, uint64_t& text_offset) {
  if (logprobs.empty()) return;
  ordered_json json = EmptyCompletionLogprobs();
  AppendCompletionLogprobs(logprobs, tokens_as_ids, text_offset, json);
  Take(json);
}

void CompletionLogprobsText::AppendPrompt(const TokenLogprobs& prompt, uint32_t alternatives, bool tokens_as_ids,
                                          uint64_t& text_offset) {
  if (prompt.empty()) return;
  // A token at a time, so a long prompt never stands as one tree.
  TokenLogprobs first;
  *first.Add() = prompt[0];
  ordered_json json = EmptyCompletionLogprobs();
  AppendCompletionPromptLogprobs(first, alternatives, tokens_as_ids, text_offset, json);
  Take(json);
  for (int i = 1; i < prompt.size(); ++i) {
    json = EmptyCompletionLogprobs();
    AppendCompletionTokenLogprob(prompt[i], alternatives, tokens_as_ids, text_offset, json);
    Take(json);
  }
}

void CompletionLogprobsText::AppendObjectTo(std::string& out, const CompletionLogprobsText* prefix) const {
  out += "{\"tokens\":";
  AppendJoined(prefix != nullptr ? &prefix->tokens_ : nullptr, tokens_, out);
  out += ",\"token_logprobs\":";
  AppendJoined(prefix != nullptr ? &prefix->token_logprobs_ : nullptr, token_logprobs_, out);
  out += ",\"top_logprobs\":";
  AppendJoined(prefix != nullptr ? &prefix->top_logprobs_ : nullptr, top_logprobs_, out);
  out += ",\"text_offset\":";
  AppendJoined(prefix != nullptr ? &prefix->text_offset_ : nullptr, text_offset_, out);
  out += '}';
}

std::string VllmPromptLogprobsText(const TokenLogprobs& prompt, uint32_t alternatives) {
  std::string out = "[";
  for (int i = 0; i < prompt.size(); ++i) {
    if (i > 0) out += ',';
    out += i == 0 ? "null" : DumpJson(VllmPromptLogprobsPosition(prompt[i], alternatives));
  }
  out += ']';
  return out;
}

}  // namespace llmc::gateway
