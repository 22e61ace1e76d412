#include "gateway/openai/responses_output.h"

#include <algorithm>
#include <random>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "gateway/openai/json_fields.h"
#include "gateway/openai/openai_error.h"

namespace llmc::gateway {
namespace {

using nlohmann::ordered_json;

std::string RandomHex() {
  thread_local std::mt19937_64 generator{std::random_device{}()};
  return absl::StrFormat("%016x%016x", generator(), generator());
}

bool IsWhitespace(std::string_view text) {
  return std::all_of(text.begin(), text.end(), [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; });
}

// The `code` of a failed response's error, from the codes the Responses API defines.
std::string FailureCode(const absl::Status& status) {
  if (std::string code = ErrorCodeOf(status); !code.empty()) return code;
  switch (status.code()) {
    case absl::StatusCode::kResourceExhausted:
      return "rate_limit_exceeded";
    case absl::StatusCode::kInvalidArgument:
      return "invalid_prompt";
    default:
      return "server_error";
  }
}

// The worker does not count reasoning tokens apart from the others, so reasoning_tokens is 0.
ordered_json UsageJson(const v1::Usage& usage) {
  ordered_json out;
  out["input_tokens"] = usage.prompt_tokens();
  out["input_tokens_details"] = ordered_json{{"cached_tokens", usage.cached_prompt_tokens()}};
  out["output_tokens"] = usage.completion_tokens();
  out["output_tokens_details"] = ordered_json{{"reasoning_tokens", 0}};
  out["total_tokens"] = static_cast<uint64_t>(usage.prompt_tokens()) + usage.completion_tokens();
  return out;
}

}  // namespace

std::string NewResponsesId() { return absl::StrCat("resp_", RandomHex()); }

ResponsesOutputBuilder::ResponsesOutputBuilder(const ResponsesRequest& request, std::string id, int64_t created_at)
    : id_(std::move(id)),
      created_at_(created_at),
      model_(request.chat.model),
      echo_(request.echo),
      params_(request.params) {}

// --- events ---

ordered_json ResponsesOutputBuilder::NewEvent(const char* type) {
  return ordered_json{{"type", type}, {"sequence_number", sequence_number_++}};
}

void ResponsesOutputBuilder::Push(Events events, ordered_json event) {
  std::string type = event["type"].get<std::string>();
  events->emplace_back(std::move(type), DumpJson(event));
}

ordered_json ResponsesOutputBuilder::PartJson(const Item& item) const {
  if (item.type == ItemType::kReasoning) return ordered_json{{"type", "reasoning_text"}, {"text", item.text}};
  return ordered_json{{"type", "output_text"},
                      {"text", item.text},
                      {"annotations", ordered_json::array()},
                      {"logprobs", ordered_json::array()}};
}

ordered_json ResponsesOutputBuilder::ItemJson(const Item& item, bool added) const {
  ordered_json out;
  out["id"] = item.id;
  switch (item.type) {
    case ItemType::kMessage:
      out["type"] = "message";
      out["status"] = item.status;
      out["role"] = "assistant";
      out["content"] = added ? ordered_json::array() : ordered_json::array({PartJson(item)});
      break;
    case ItemType::kReasoning:
      out["type"] = "reasoning";
      out["status"] = item.status;
      out["summary"] = ordered_json::array();
      out["content"] = added ? ordered_json::array() : ordered_json::array({PartJson(item)});
      break;
    case ItemType::kFunctionCall:
      out["type"] = "function_call";
      out["status"] = item.status;
      out["call_id"] = item.call_id;
      out["name"] = item.name;
      out["arguments"] = added ? std::string() : item.text;
      break;
  }
  return out;
}

ordered_json ResponsesOutputBuilder::ResponseJson(const std::string& status, const v1::Usage* usage) const {
  ordered_json out;
  out["id"] = id_;
  out["object"] = "response";
  out["created_at"] = created_at_;
  out["status"] = status;
  out["background"] = false;
  out["error"] = status == "failed" ? error_ : ordered_json(nullptr);
  out["incomplete_details"] =
      status == "incomplete" ? ordered_json{{"reason", "max_output_tokens"}} : ordered_json(nullptr);
  out["model"] = model_;
  ordered_json output = ordered_json::array();
  for (const Item& item : items_) output.push_back(ItemJson(item, /*added=*/false));
  out["output"] = std::move(output);
  for (const auto& [key, value] : echo_.items()) out[key] = value;
  out["usage"] = usage != nullptr ? UsageJson(*usage) : ordered_json(nullptr);
  return out;
}

// --- items ---

void ResponsesOutputBuilder::Open(Item item, Events events) {
  CloseOpen("completed", events);
  items_.push_back(std::move(item));
  open_ = items_.size() - 1;
  if (events == nullptr) return;
  const Item& opened = items_.back();
  ordered_json added = NewEvent("response.output_item.added");
  added["output_index"] = *open_;
  added["item"] = ItemJson(opened, /*added=*/true);
  Push(events, std::move(added));
  if (opened.type == ItemType::kFunctionCall) return;
  ordered_json part = NewEvent("response.content_part.added");
  part["item_id"] = opened.id;
  part["output_index"] = *open_;
  part["content_index"] = 0;
  part["part"] = PartJson(opened);
  Push(events, std::move(part));
}

void ResponsesOutputBuilder::CloseOpen(const std::string& status, Events events) {
  if (!open_.has_value()) return;
  const size_t index = *open_;
  open_.reset();
  Item& item = items_[index];
  item.status = status;
  if (events == nullptr) return;
  if (item.type == ItemType::kFunctionCall) {
    ordered_json done = NewEvent("response.function_call_arguments.done");
    done["item_id"] = item.id;
    done["output_index"] = index;
    done["name"] = item.name;
    done["arguments"] = item.text;
    Push(events, std::move(done));
  } else {
    const bool reasoning = item.type == ItemType::kReasoning;
    ordered_json done = NewEvent(reasoning ? "response.reasoning_text.done" : "response.output_text.done");
    done["item_id"] = item.id;
    done["output_index"] = index;
    done["content_index"] = 0;
    done["text"] = item.text;
    if (!reasoning) done["logprobs"] = ordered_json::array();
    Push(events, std::move(done));
    ordered_json part = NewEvent("response.content_part.done");
    part["item_id"] = item.id;
    part["output_index"] = index;
    part["content_index"] = 0;
    part["part"] = PartJson(item);
    Push(events, std::move(part));
  }
  ordered_json item_done = NewEvent("response.output_item.done");
  item_done["output_index"] = index;
  item_done["item"] = ItemJson(item, /*added=*/false);
  Push(events, std::move(item_done));
}

void ResponsesOutputBuilder::AddText(ItemType type, std::string_view text, Events events) {
  if (!open_.has_value() || items_[*open_].type != type) {
    if (type == ItemType::kMessage && IsWhitespace(text)) {
      pending_whitespace_ += text;
      return;
    }
    // Whitespace before a message's first words belongs to it; before anything else it is dropped.
    std::string before = type == ItemType::kMessage ? std::move(pending_whitespace_) : std::string();
    pending_whitespace_.clear();
    Open(Item{type, absl::StrCat(type == ItemType::kMessage ? "msg_" : "rs_", RandomHex())}, events);
    if (!before.empty()) AppendText(before, events);
  }
  AppendText(text, events);
}

void ResponsesOutputBuilder::AppendText(std::string_view text, Events events) {
  Item& item = items_[*open_];
  item.text.append(text.data(), text.size());
  if (events == nullptr) return;
  const bool reasoning = item.type == ItemType::kReasoning;
  ordered_json delta = NewEvent(reasoning ? "response.reasoning_text.delta" : "response.output_text.delta");
  delta["item_id"] = item.id;
  delta["output_index"] = *open_;
  delta["content_index"] = 0;
  delta["delta"] = std::string(text);
  if (!reasoning) delta["logprobs"] = ordered_json::array();
  Push(events, std::move(delta));
}

absl::Status ResponsesOutputBuilder::AddToolCall(const v1::ToolCallDelta& call, Events events) {
  auto found = calls_.find(call.index());
  if (found == calls_.end()) {
    pending_whitespace_.clear();
    Item item{ItemType::kFunctionCall, absl::StrCat("fc_", RandomHex())};
    item.call_id = call.id().empty() ? absl::StrCat("call_", RandomHex()) : call.id();
    item.name = call.name();
    Open(std::move(item), events);
    found = calls_.emplace(call.index(), *open_).first;
  } else if (open_ != found->second) {
    return absl::InternalError(
        absl::StrCat("the worker sent arguments of tool call ", call.index(), " after a later output item began"));
  }
  if (call.arguments().empty()) return absl::OkStatus();
  Item& item = items_[found->second];
  item.text += call.arguments();
  if (events == nullptr) return absl::OkStatus();
  ordered_json delta = NewEvent("response.function_call_arguments.delta");
  delta["item_id"] = item.id;
  delta["output_index"] = found->second;
  delta["delta"] = call.arguments();
  Push(events, std::move(delta));
  return absl::OkStatus();
}

void ResponsesOutputBuilder::CloseAll(Events events) {
  if (closed_) return;
  closed_ = true;
  // An answer with nothing in it still has its (empty) message, as clients read output[0] for the text.
  if (items_.empty()) {
    Open(Item{ItemType::kMessage, absl::StrCat("msg_", RandomHex())}, events);
    if (!pending_whitespace_.empty()) AppendText(pending_whitespace_, events);
  }
  pending_whitespace_.clear();
  CloseOpen(FinalStatus(), events);
}

std::string ResponsesOutputBuilder::FinalStatus() const {
  return finish_reason_ == v1::FINISH_REASON_LENGTH ? "incomplete" : "completed";
}

absl::Status ResponsesOutputBuilder::Consume(const v1::GenerateResponse& response, Events events) {
  for (const v1::TokenDelta& delta : response.deltas()) {
    if (delta.choice_index() != 0) {
      return absl::InternalError(
          absl::StrCat("the worker sent choice ", delta.choice_index(), " but a Responses request has one"));
    }
    if (delta.finish_reason() == v1::FINISH_REASON_ABORT) {
      return absl::UnavailableError("the generation was aborted by the worker (draining?)");
    }
    if (delta.finish_reason() == v1::FINISH_REASON_ERROR) {
      return absl::InternalError("the generation failed in the worker");
    }
    if (delta.has_typed()) {
      const v1::TypedOutput& typed = delta.typed();
      if (!typed.reasoning().empty()) AddText(ItemType::kReasoning, typed.reasoning(), events);
      if (!typed.content().empty()) AddText(ItemType::kMessage, typed.content(), events);
      for (const v1::ToolCallDelta& call : typed.tool_calls()) RETURN_IF_ERROR(AddToolCall(call, events));
    } else if (!delta.text().empty()) {
      AddText(ItemType::kMessage, delta.text(), events);
    }
    if (delta.finish_reason() != v1::FINISH_REASON_UNSPECIFIED) finish_reason_ = delta.finish_reason();
  }
  return absl::OkStatus();
}

// --- AnswerShaper ---

std::vector<SseEvent> ResponsesOutputBuilder::Start() {
  std::vector<SseEvent> events;
  for (const char* type : {"response.created", "response.in_progress"}) {
    ordered_json event = NewEvent(type);
    event["response"] = ResponseJson("in_progress", nullptr);
    Push(&events, std::move(event));
  }
  return events;
}

absl::StatusOr<std::vector<SseEvent>> ResponsesOutputBuilder::OnResponse(const v1::GenerateResponse& response,
                                                                         size_t /*prompt*/) {
  std::vector<SseEvent> events;
  RETURN_IF_ERROR(Consume(response, &events));
  return events;
}

std::vector<SseEvent> ResponsesOutputBuilder::Finish(const v1::Usage& usage) {
  std::vector<SseEvent> events;
  CloseAll(&events);
  const std::string status = FinalStatus();
  ordered_json event = NewEvent(status == "incomplete" ? "response.incomplete" : "response.completed");
  event["response"] = ResponseJson(status, &usage);
  Push(&events, std::move(event));
  return events;
}

std::vector<SseEvent> ResponsesOutputBuilder::Fail(const absl::Status& given) {
  const absl::Status status = ForClient(given);
  std::string message(status.message());
  if (message.empty()) message = absl::StatusCodeToString(status.code());
  error_ = ordered_json{{"code", FailureCode(status)}, {"message", std::move(message)}};
  if (open_.has_value()) items_[*open_].status = "incomplete";
  open_.reset();
  closed_ = true;
  std::vector<SseEvent> events;
  ordered_json event = NewEvent("response.failed");
  event["response"] = ResponseJson("failed", nullptr);
  Push(&events, std::move(event));
  return events;
}

absl::Status ResponsesOutputBuilder::Accumulate(const v1::GenerateResponse& response, size_t /*prompt*/) {
  return Consume(response, nullptr);
}

size_t ResponsesOutputBuilder::AnswerBytes() const {
  size_t bytes = pending_whitespace_.size();
  for (const Item& item : items_) bytes += item.text.size() + item.call_id.size() + item.name.size();
  return bytes;
}

std::string ResponsesOutputBuilder::FinalJson(const v1::Usage& usage) {
  CloseAll(nullptr);
  return DumpJson(ResponseJson(FinalStatus(), &usage));
}

}  // namespace llmc::gateway
