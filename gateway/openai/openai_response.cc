#include "gateway/openai/openai_response.h"

#include <algorithm>
#include <random>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gateway/openai/json_fields.h"
#include "gateway/openai/openai_logprobs.h"

namespace llmc::gateway {
namespace {

using nlohmann::ordered_json;

constexpr char kChatObject[] = "chat.completion";
constexpr char kChatChunkObject[] = "chat.completion.chunk";
constexpr char kCompletionObject[] = "text_completion";

ordered_json FinishReasonJson(v1::FinishReason reason) {
  switch (reason) {
    case v1::FINISH_REASON_STOP:
      return "stop";
    case v1::FINISH_REASON_LENGTH:
      return "length";
    case v1::FINISH_REASON_TOOL_CALLS:
      return "tool_calls";
    default:
      return nullptr;  // still generating (ABORT and ERROR never get here: Check turns them into errors)
  }
}

// A streamed tool call's entries as OpenAI sends them: the first of an index carries id, type and name with
// empty arguments; argument text follows in entries with only the index.
std::vector<ordered_json> ToolCallEntries(const v1::ToolCallDelta& call) {
  std::vector<ordered_json> entries;
  if (!call.id().empty()) {
    entries.push_back(ordered_json{{"index", call.index()},
                                   {"id", call.id()},
                                   {"type", "function"},
                                   {"function", ordered_json{{"name", call.name()}, {"arguments", ""}}}});
  }
  if (!call.arguments().empty()) {
    entries.push_back(
        ordered_json{{"index", call.index()}, {"function", ordered_json{{"arguments", call.arguments()}}}});
  }
  return entries;
}

}  // namespace

std::string NewResponseId(OpenAiKind kind) {
  thread_local std::mt19937_64 generator{std::random_device{}()};
  return absl::StrFormat("%s-%016x%016x", kind == OpenAiKind::kChat ? "chatcmpl" : "cmpl", generator(), generator());
}

OpenAiResponseBuilder::OpenAiResponseBuilder(const OpenAiRequest& request, std::string id, int64_t created,
                                             std::string model, std::string system_fingerprint)
    : kind_(request.kind),
      id_(std::move(id)),
      created_(created),
      model_(std::move(model)),
      system_fingerprint_(std::move(system_fingerprint)),
      include_usage_(request.include_usage),
      logprobs_(request.logprobs),
      echo_(request.echo),
      include_reasoning_(request.include_reasoning),
      top_logprobs_(request.top_logprobs),
      tokens_as_ids_(request.tokens_as_ids),
      echo_logprobs_(request.kind == OpenAiKind::kCompletion && request.echo && request.logprobs),
      prompt_logprobs_(request.prompt_logprobs),
      prompts_(request.num_prompts()),
      stop_strings_(request.generate.sampling().stop().begin(), request.generate.sampling().stop().end()),
      stop_token_ids_(request.generate.sampling().stop_token_ids().begin(),
                      request.generate.sampling().stop_token_ids().end()),
      generated_per_prompt_(request.num_choices()),
      best_of_n_(request.best_of_n),
      choices_(request.total_choices()) {
  for (size_t prompt = 0; echo_ && prompt < prompts_.size() && prompt < request.echo_texts.size(); ++prompt) {
    prompts_[prompt].echo_text = request.echo_texts[prompt];
    prompts_[prompt].echo_code_points = CountCodePoints(request.echo_texts[prompt]);
  }
  for (size_t i = 0; i < choices_.size(); ++i) {
    Choice& choice = choices_[i];
    // Choice i answers prompt i / n.
    choice.prompt = i / request.num_choices();
    choice.text_offset = prompts_[choice.prompt].echo_code_points;
  }
}

absl::Status OpenAiResponseBuilder::Check(const v1::TokenDelta& delta) const {
  if (delta.choice_index() >= choices_.size()) {
    return absl::InternalError(absl::StrCat("the worker sent choice ", delta.choice_index(), " but the request has ",
                                            choices_.size(), " choices"));
  }
  if (delta.finish_reason() == v1::FINISH_REASON_ABORT) {
    return absl::UnavailableError(
        absl::StrCat("generation of choice ", delta.choice_index(), " was aborted by the worker (draining?)"));
  }
  if (delta.finish_reason() == v1::FINISH_REASON_ERROR) {
    return absl::InternalError(absl::StrCat("generation of choice ", delta.choice_index(), " failed in the worker"));
  }
  return absl::OkStatus();
}

bool OpenAiResponseBuilder::JoinPromptLogprobs(size_t prompt, const v1::GenerateResponse& response,
                                               const TokenLogprobs** whole) {
  *whole = &response.prompt_logprobs();
  if (prompt >= prompts_.size()) return true;
  TokenLogprobs& parts = prompts_[prompt].logprob_parts;
  if (response.deltas().empty() && !response.prompt_logprobs().empty()) {
    parts.MergeFrom(response.prompt_logprobs());
    return false;
  }
  if (parts.empty()) return true;
  parts.MergeFrom(response.prompt_logprobs());
  *whole = &parts;
  return true;
}

void OpenAiResponseBuilder::TakePromptLogprobs(size_t prompt, const TokenLogprobs& logprobs) {
  if (prompt >= prompts_.size() || logprobs.empty()) return;
  Prompt& state = prompts_[prompt];
  if (prompt_logprobs_.has_value())
    state.vllm_prompt_logprobs_text = VllmPromptLogprobsText(logprobs, *prompt_logprobs_);
  if (!echo_logprobs_) return;
  // The offsets count the prompt's token texts, and the generated tokens' offsets follow on from them.
  uint64_t text_offset = 0;
  state.echo_logprobs = CompletionLogprobsText();
  state.echo_logprobs.AppendPrompt(logprobs, top_logprobs_, tokens_as_ids_, text_offset);
  const size_t first = prompt * generated_per_prompt_;
  for (size_t i = first; i < first + generated_per_prompt_ && i < choices_.size(); ++i) {
    choices_[i].text_offset = text_offset;
  }
}

ordered_json OpenAiResponseBuilder::Header(const char* object) const {
  ordered_json out;
  out["id"] = id_;
  out["object"] = object;
  out["created"] = created_;
  out["model"] = model_;
  out["system_fingerprint"] = system_fingerprint_;
  return out;
}

ordered_json OpenAiResponseBuilder::Chunk(ordered_json choice) const {
  ordered_json out = Header(is_chat() ? kChatChunkObject : kCompletionObject);
  out["choices"] = ordered_json::array({std::move(choice)});
  // OpenAI puts "usage": null on every chunk but the last when usage was asked for.
  if (include_usage_) out["usage"] = nullptr;
  return out;
}

// The stop string that matched, the stop token id (as a number, like vLLM), or null for EOS and length.
ordered_json OpenAiResponseBuilder::StopReason(v1::FinishReason finish_reason, const std::string& stop_reason) const {
  if (finish_reason != v1::FINISH_REASON_STOP || stop_reason.empty()) return nullptr;
  const bool is_stop_string = std::find(stop_strings_.begin(), stop_strings_.end(), stop_reason) != stop_strings_.end();
  int32_t token_id = 0;
  if (!is_stop_string && absl::SimpleAtoi(stop_reason, &token_id) &&
      std::find(stop_token_ids_.begin(), stop_token_ids_.end(), token_id) != stop_token_ids_.end()) {
    return token_id;
  }
  return stop_reason;
}

ordered_json OpenAiResponseBuilder::LogprobsOf(const v1::TokenDelta& delta, Choice& choice) const {
  if (!logprobs_) return nullptr;
  if (is_chat()) {
    ordered_json content = ordered_json::array();
    AppendChatLogprobs(delta.logprobs(), tokens_as_ids_, content);
    return ordered_json{{"content", std::move(content)}};
  }
  ordered_json out = EmptyCompletionLogprobs();
  AppendCompletionLogprobs(delta.logprobs(), tokens_as_ids_, choice.text_offset, out);
  return out;
}

ordered_json OpenAiResponseBuilder::UsageJson(const v1::Usage& usage) const {
  ordered_json out;
  out["prompt_tokens"] = usage.prompt_tokens();
  out["completion_tokens"] = usage.completion_tokens();
  out["total_tokens"] = static_cast<uint64_t>(usage.prompt_tokens()) + usage.completion_tokens();
  if (usage.cached_prompt_tokens() > 0) {
    out["prompt_tokens_details"] = ordered_json{{"cached_tokens", usage.cached_prompt_tokens()}};
  }
  return out;
}

std::vector<std::string> OpenAiResponseBuilder::Start() {
  std::vector<std::string> chunks;
  if (!is_chat()) return chunks;
  for (size_t i = 0; i < choices_.size(); ++i) {
    ordered_json choice;
    choice["index"] = i;
    choice["delta"] = ordered_json{{"role", "assistant"}, {"content", ""}};
    choice["logprobs"] = nullptr;
    choice["finish_reason"] = nullptr;
    choice["stop_reason"] = nullptr;
    chunks.push_back(DumpJson(Chunk(std::move(choice))));
  }
  return chunks;
}

absl::StatusOr<std::vector<std::string>> OpenAiResponseBuilder::OnResponse(const v1::GenerateResponse& response,
                                                                           size_t prompt) {
  std::vector<std::string> chunks;
  const TokenLogprobs* prompt_logprobs = nullptr;
  if (!JoinPromptLogprobs(prompt, response, &prompt_logprobs)) return chunks;
  if (prompt < prompts_.size() && !prompts_[prompt].started) {
    prompts_[prompt].started = true;
    // The echo chunks' logprobs: the prompt's, whose offsets the generated tokens' continue.
    ordered_json echo_logprobs = nullptr;
    uint64_t text_offset = 0;
    if (echo_logprobs_ && !prompt_logprobs->empty()) {
      echo_logprobs = EmptyCompletionLogprobs();
      AppendCompletionPromptLogprobs(*prompt_logprobs, top_logprobs_, tokens_as_ids_, text_offset, echo_logprobs);
    }
    prompts_[prompt].logprob_parts.Clear();
    const size_t first = prompt * generated_per_prompt_;
    for (size_t i = first; echo_ && i < first + generated_per_prompt_ && i < choices_.size(); ++i) {
      if (!echo_logprobs.is_null()) choices_[i].text_offset = text_offset;
      ordered_json choice;
      choice["index"] = i;
      choice["text"] = prompts_[prompt].echo_text;
      choice["logprobs"] = echo_logprobs;
      choice["finish_reason"] = nullptr;
      choice["stop_reason"] = nullptr;
      chunks.push_back(DumpJson(Chunk(std::move(choice))));
    }
  }
  for (const v1::TokenDelta& delta : response.deltas()) {
    if (absl::Status status = Check(delta); !status.ok()) return status;
    if (is_chat() && delta.has_typed()) {
      AppendTypedChunks(delta, chunks);
      continue;
    }
    const bool finished = delta.finish_reason() != v1::FINISH_REASON_UNSPECIFIED;
    const bool has_logprobs = logprobs_ && delta.logprobs_size() > 0;
    // Text held back (half a UTF-8 character, a possible stop string) leaves nothing to send yet.
    if (delta.text().empty() && !finished && !has_logprobs) continue;
    Choice& state = choices_[delta.choice_index()];
    ordered_json choice;
    choice["index"] = delta.choice_index();
    if (is_chat()) {
      // OpenAI's last chunk has an empty delta; vLLM's too when no text came with the finish.
      choice["delta"] =
          delta.text().empty() && finished ? ordered_json::object() : ordered_json{{"content", delta.text()}};
    } else {
      choice["text"] = delta.text();
    }
    choice["logprobs"] = LogprobsOf(delta, state);
    choice["finish_reason"] = FinishReasonJson(delta.finish_reason());
    choice["stop_reason"] = StopReason(delta.finish_reason(), delta.stop_reason());
    chunks.push_back(DumpJson(Chunk(std::move(choice))));
  }
  return chunks;
}

// One chunk for the delta's reasoning and content, one per tool-call entry; logprobs ride on the first chunk,
// the finish reason on the last (alone when nothing else came with it).
void OpenAiResponseBuilder::AppendTypedChunks(const v1::TokenDelta& delta, std::vector<std::string>& chunks) {
  const v1::TypedOutput& typed = delta.typed();
  std::vector<ordered_json> deltas;
  ordered_json text = ordered_json::object();
  if (include_reasoning_ && !typed.reasoning().empty()) {
    text["reasoning_content"] = typed.reasoning();
    text["reasoning"] = typed.reasoning();
  }
  if (!typed.content().empty()) text["content"] = typed.content();
  const bool has_logprobs = logprobs_ && delta.logprobs_size() > 0;
  if (!text.empty() || has_logprobs) deltas.push_back(std::move(text));
  for (const v1::ToolCallDelta& call : typed.tool_calls()) {
    for (ordered_json& entry : ToolCallEntries(call)) {
      deltas.push_back(ordered_json{{"tool_calls", ordered_json::array({std::move(entry)})}});
    }
  }
  const bool finished = delta.finish_reason() != v1::FINISH_REASON_UNSPECIFIED;
  if (deltas.empty()) {
    if (!finished) return;
    deltas.push_back(ordered_json::object());
  }
  Choice& state = choices_[delta.choice_index()];
  for (size_t i = 0; i < deltas.size(); ++i) {
    const bool last = i + 1 == deltas.size();
    ordered_json choice;
    choice["index"] = delta.choice_index();
    choice["delta"] = std::move(deltas[i]);
    choice["logprobs"] = i == 0 ? LogprobsOf(delta, state) : ordered_json(nullptr);
    choice["finish_reason"] = last ? FinishReasonJson(delta.finish_reason()) : ordered_json(nullptr);
    choice["stop_reason"] = last ? StopReason(delta.finish_reason(), delta.stop_reason()) : ordered_json(nullptr);
    chunks.push_back(DumpJson(Chunk(std::move(choice))));
  }
}

std::vector<std::string> OpenAiResponseBuilder::Finish(const v1::Usage& usage) const {
  if (!include_usage_) return {};
  ordered_json out = Header(is_chat() ? kChatChunkObject : kCompletionObject);
  out["choices"] = ordered_json::array();
  out["usage"] = UsageJson(usage);
  return {DumpJson(out)};
}

absl::Status OpenAiResponseBuilder::Accumulate(const v1::GenerateResponse& response, size_t prompt) {
  const TokenLogprobs* prompt_logprobs = nullptr;
  if (!JoinPromptLogprobs(prompt, response, &prompt_logprobs)) return absl::OkStatus();
  TakePromptLogprobs(prompt, *prompt_logprobs);
  if (prompt < prompts_.size()) prompts_[prompt].logprob_parts.Clear();
  for (const v1::TokenDelta& delta : response.deltas()) {
    if (absl::Status status = Check(delta); !status.ok()) return status;
    Choice& choice = choices_[delta.choice_index()];
    if (is_chat() && delta.has_typed()) {
      choice.text += delta.typed().content();
      choice.reasoning += delta.typed().reasoning();
      for (const v1::ToolCallDelta& call : delta.typed().tool_calls()) AccumulateToolCall(call, choice);
    } else {
      choice.text += delta.text();
    }
    for (const v1::TokenLogprob& logprob : delta.logprobs()) choice.cumulative_logprob += logprob.logprob();
    if (logprobs_) {
      if (is_chat()) {
        choice.chat_logprobs.Append(delta.logprobs(), tokens_as_ids_);
      } else {
        choice.completion_logprobs.Append(delta.logprobs(), tokens_as_ids_, choice.text_offset);
      }
    }
    if (delta.finish_reason() != v1::FINISH_REASON_UNSPECIFIED) {
      choice.finish_reason = delta.finish_reason();
      choice.stop_reason = delta.stop_reason();
    }
  }
  return absl::OkStatus();
}

void OpenAiResponseBuilder::AccumulateToolCall(const v1::ToolCallDelta& call, Choice& choice) {
  if (!call.id().empty() || call.index() >= choice.tool_calls.size()) {
    choice.tool_calls.push_back(ToolCall{call.id(), call.name(), ""});
  }
  const size_t index = std::min<size_t>(call.index(), choice.tool_calls.size() - 1);
  choice.tool_calls[index].arguments += call.arguments();
}

size_t OpenAiResponseBuilder::AnswerBytes() const {
  size_t bytes = 0;
  for (const Choice& choice : choices_) {
    const Prompt& prompt = prompts_[choice.prompt];
    bytes += prompt.echo_text.size() + choice.text.size() + choice.reasoning.size() + choice.chat_logprobs.bytes() +
             choice.completion_logprobs.bytes() + prompt.echo_logprobs.bytes();
    for (const ToolCall& call : choice.tool_calls) bytes += call.id.size() + call.name.size() + call.arguments.size();
    // Completions repeat the prompt's logprobs in each choice; chat answers them once.
    if (!is_chat()) bytes += prompt.vllm_prompt_logprobs_text.size();
  }
  if (is_chat() && !prompts_.empty()) bytes += prompts_[0].vllm_prompt_logprobs_text.size();
  return bytes;
}

std::vector<const OpenAiResponseBuilder::Choice*> OpenAiResponseBuilder::AnsweredChoices() const {
  std::vector<const Choice*> answered;
  for (const Choice& choice : choices_) answered.push_back(&choice);
  if (best_of_n_ == 0) return answered;
  std::vector<const Choice*> best;
  for (size_t first = 0; first < answered.size(); first += generated_per_prompt_) {
    const auto begin = answered.begin() + static_cast<std::ptrdiff_t>(first);
    const auto end = begin + std::min<std::ptrdiff_t>(generated_per_prompt_, answered.end() - begin);
    // Ties keep the generation order, so equal greedy samples answer in a stable order.
    std::stable_sort(begin, end,
                     [](const Choice* a, const Choice* b) { return a->cumulative_logprob > b->cumulative_logprob; });
    best.insert(best.end(), begin, begin + std::min<std::ptrdiff_t>(best_of_n_, end - begin));
  }
  return best;
}

// As OpenAI answers: content null when the model only called tools; reasoning under vLLM's two names.
ordered_json OpenAiResponseBuilder::ChatMessage(const Choice& state) const {
  ordered_json message{{"role", "assistant"}};
  message["content"] =
      state.text.empty() && !state.tool_calls.empty() ? ordered_json(nullptr) : ordered_json(state.text);
  if (include_reasoning_ && !state.reasoning.empty()) {
    message["reasoning_content"] = state.reasoning;
    message["reasoning"] = state.reasoning;
  }
  if (!state.tool_calls.empty()) {
    ordered_json calls = ordered_json::array();
    for (const ToolCall& call : state.tool_calls) {
      calls.push_back(ordered_json{{"id", call.id},
                                   {"type", "function"},
                                   {"function", ordered_json{{"name", call.name}, {"arguments", call.arguments}}}});
    }
    message["tool_calls"] = std::move(calls);
  }
  return message;
}

// Written straight into the body: the accumulated texts are spliced in, never copied into a tree.
std::string OpenAiResponseBuilder::FinalJson(const v1::Usage& usage) const {
  const std::vector<const Choice*> answered = AnsweredChoices();
  std::string body = DumpJson(Header(is_chat() ? kChatObject : kCompletionObject));
  body.pop_back();  // the header's closing brace: the choices follow
  body.reserve(AnswerBytes() + 512 * (answered.size() + 1));
  body += ",\"choices\":[";
  for (size_t i = 0; i < answered.size(); ++i) {
    const Choice& state = *answered[i];
    const Prompt& prompt = prompts_[state.prompt];
    if (i > 0) body += ',';
    absl::StrAppend(&body, "{\"index\":", i);
    if (is_chat()) {
      body += ",\"message\":";
      body += DumpJson(ChatMessage(state));
      body += ",\"logprobs\":";
      if (logprobs_) {
        body += "{\"content\":";
        state.chat_logprobs.AppendArrayTo(body);
        body += '}';
      } else {
        body += "null";
      }
    } else {
      body += ",\"text\":";
      body += DumpJson(ordered_json(prompt.echo_text + state.text));
      body += ",\"logprobs\":";
      if (logprobs_) {
        state.completion_logprobs.AppendObjectTo(body, echo_logprobs_ ? &prompt.echo_logprobs : nullptr);
      } else {
        body += "null";
      }
    }
    body += ",\"finish_reason\":";
    body += DumpJson(FinishReasonJson(state.finish_reason));
    body += ",\"stop_reason\":";
    body += DumpJson(StopReason(state.finish_reason, state.stop_reason));
    if (prompt_logprobs_.has_value() && !is_chat()) {
      body += ",\"prompt_logprobs\":";
      body += prompt.vllm_prompt_logprobs_text.empty() ? "null" : prompt.vllm_prompt_logprobs_text;
    }
    body += '}';
  }
  body += ']';
  // vLLM puts a chat request's prompt logprobs beside the choices.
  if (prompt_logprobs_.has_value() && is_chat()) {
    body += ",\"prompt_logprobs\":";
    body += prompts_[0].vllm_prompt_logprobs_text.empty() ? "null" : prompts_[0].vllm_prompt_logprobs_text;
  }
  body += ",\"usage\":";
  body += DumpJson(UsageJson(usage));
  body += '}';
  return body;
}

}  // namespace llmc::gateway
