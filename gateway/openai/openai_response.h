#ifndef LLMC_GATEWAY_OPENAI_OPENAI_RESPONSE_H_
#define LLMC_GATEWAY_OPENAI_OPENAI_RESPONSE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gateway/openai/logprobs_text.h"
#include "gateway/openai/openai_request.h"
#include "llmc/v1/worker.pb.h"
#include "nlohmann/json.hpp"

namespace llmc::gateway {

// "chatcmpl-<32 hex digits>" for chat, "cmpl-<32 hex digits>" for completions.
std::string NewResponseId(OpenAiKind kind);

// Turns the worker's GenerateResponse stream for one request into OpenAI JSON: chunks for a streamed
// answer (Start, OnResponse..., Finish) or one body (Accumulate..., FinalJson). Not thread-safe; one
// instance per request, used by one thread (or strand) at a time.
class OpenAiResponseBuilder {
 public:
  OpenAiResponseBuilder(const OpenAiRequest& request, std::string id, int64_t created, std::string model,
                        std::string system_fingerprint);

  // Streaming. Each string is the JSON data of one SSE event; the caller frames it (`data: ...\n\n`) and
  // sends `data: [DONE]` at the end itself.
  // Chat: one chunk per choice with delta {"role":"assistant","content":""}. Otherwise nothing.
  std::vector<std::string> Start();
  // One chunk per delta that carries text, logprobs or a finish reason; `prompt` is the prompt whose
  // generation sent `response` (its choices are already numbered among all prompts'). Completions with
  // echo: a prompt's first response is preceded by one chunk per choice of that prompt carrying the prompt
  // text (and, with logprobs, the prompt's logprobs). A choice that ended in ABORT or ERROR, or a choice index
  // beyond `n`, is an error status: send it with StreamErrorEvent and stop.
  absl::StatusOr<std::vector<std::string>> OnResponse(const v1::GenerateResponse& response, size_t prompt = 0);
  // The usage chunk (choices: []) when stream_options.include_usage was set; nothing otherwise.
  std::vector<std::string> Finish(const v1::Usage& usage) const;

  // Non-streaming. Errors as for OnResponse; after one, answer with ErrorEnvelope instead of FinalJson. What
  // accumulates is kept compactly (text, logprobs as their JSON text), about the size of the final body.
  absl::Status Accumulate(const v1::GenerateResponse& response, size_t prompt = 0);
  // About the bytes FinalJson would answer with now (what the gateway's max_response_bytes bounds).
  size_t AnswerBytes() const;
  // The "chat.completion" or "text_completion" body with every choice (with best_of, each prompt's n best by
  // cumulative logprob, numbered as if only they were generated) and usage.
  std::string FinalJson(const v1::Usage& usage) const;

 private:
  struct ToolCall {
    std::string id;
    std::string name;
    std::string arguments;
  };
  struct Choice {
    size_t prompt = 0;
    std::string text;  // generated (with echo, the answer's text is the prompt's then this)
    ChatLogprobsText chat_logprobs;
    CompletionLogprobsText completion_logprobs;  // the generated tokens' (echo: the prompt's come first)
    uint64_t text_offset = 0;                    // completions: code points of the choice's text so far
    v1::FinishReason finish_reason = v1::FINISH_REASON_UNSPECIFIED;
    std::string stop_reason;
    double cumulative_logprob = 0;  // of the generated tokens (best_of ranks by it)
    // Chat with typed output: `text` is the content; reasoning and the calls (OpenAI's message.tool_calls).
    std::string reasoning;
    std::vector<ToolCall> tool_calls;
  };
  // What a prompt's choices share.
  struct Prompt {
    std::string echo_text;  // completions with echo: the prompt
    uint64_t echo_code_points = 0;
    bool started = false;  // a message with deltas has arrived
    // A long prompt's logprobs come in parts over messages without deltas; the part that completes them rides
    // with the first deltas.
    TokenLogprobs logprob_parts;
    CompletionLogprobsText echo_logprobs;   // non-streamed echo with logprobs
    std::string vllm_prompt_logprobs_text;  // with prompt_logprobs: the JSON array
  };

  // The choices FinalJson answers with, in answer order: all of them, or per prompt the best_of_n_ best.
  std::vector<const Choice*> AnsweredChoices() const;

  absl::Status Check(const v1::TokenDelta& delta) const;
  void AppendTypedChunks(const v1::TokenDelta& delta, std::vector<std::string>& chunks);
  static void AccumulateToolCall(const v1::ToolCallDelta& call, Choice& choice);
  nlohmann::ordered_json ChatMessage(const Choice& state) const;
  // The worker's prompt logprobs for `prompt` (they come before any of its choices' tokens).
  // Joins `response`'s prompt logprobs to the parts before; false while more parts are to come (a message
  // without deltas), else `whole` points at them all.
  bool JoinPromptLogprobs(size_t prompt, const v1::GenerateResponse& response, const TokenLogprobs** whole);
  void TakePromptLogprobs(size_t prompt, const TokenLogprobs& logprobs);
  nlohmann::ordered_json Header(const char* object) const;
  nlohmann::ordered_json Chunk(nlohmann::ordered_json choice) const;
  nlohmann::ordered_json LogprobsOf(const v1::TokenDelta& delta, Choice& choice) const;
  nlohmann::ordered_json StopReason(v1::FinishReason finish_reason, const std::string& stop_reason) const;
  nlohmann::ordered_json UsageJson(const v1::Usage& usage) const;
  bool is_chat() const { return kind_ == OpenAiKind::kChat; }

  OpenAiKind kind_;
  std::string id_;
  int64_t created_;
  std::string model_;
  std::string system_fingerprint_;
  bool include_usage_;
  bool logprobs_;
  bool echo_;
  bool include_reasoning_;  // vLLM's include_reasoning: false drops the reasoning from the answer
  uint32_t top_logprobs_;
  bool tokens_as_ids_;
  bool echo_logprobs_;  // completions with echo and logprobs: the logprobs start with the prompt's
  std::optional<uint32_t> prompt_logprobs_;
  std::vector<Prompt> prompts_;
  std::vector<std::string> stop_strings_;
  std::vector<int32_t> stop_token_ids_;
  uint32_t generated_per_prompt_;
  uint32_t best_of_n_;
  std::vector<Choice> choices_;
};

}  // namespace llmc::gateway

#endif  // LLMC_GATEWAY_OPENAI_OPENAI_RESPONSE_H_
