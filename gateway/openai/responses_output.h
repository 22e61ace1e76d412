#ifndef LLMC_GATEWAY_OPENAI_RESPONSES_OUTPUT_H_
#define LLMC_GATEWAY_OPENAI_RESPONSES_OUTPUT_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gateway/openai/answer_shaper.h"
#include "gateway/openai/responses_request.h"
#include "llmc/v1/worker.pb.h"
#include "nlohmann/json.hpp"

namespace llmc::gateway {

// "resp_<32 hex digits>".
std::string NewResponsesId();

// Shapes the worker's messages for one POST /v1/responses request as the Responses API answers: a
// `response` object (non-streaming), or named SSE events numbered by sequence_number from 0 (streaming):
//   response.created, response.in_progress,
//   per output item, in order: response.output_item.added,
//     a message:   response.content_part.added, response.output_text.delta..., response.output_text.done,
//                  response.content_part.done;
//     reasoning:   the same with response.reasoning_text.delta / .done;
//     a tool call: response.function_call_arguments.delta..., response.function_call_arguments.done;
//   response.output_item.done,
//   and last response.completed (response.incomplete when max_output_tokens ran out, response.failed on an
//   error after the stream began).
// The worker's typed deltas (TokenDelta.typed) say what is reasoning, content and which tool call; a delta
// without them is content. An item ends when the next begins: reasoning, then a message and/or calls, as the
// model wrote them. Content that is only whitespace opens no message (the line breaks a model writes
// between its reasoning and a tool call), unless nothing else comes.
class ResponsesOutputBuilder final : public AnswerShaper {
 public:
  ResponsesOutputBuilder(const ResponsesRequest& request, std::string id, int64_t created_at);

  std::vector<SseEvent> Start() override;
  absl::StatusOr<std::vector<SseEvent>> OnResponse(const v1::GenerateResponse& response, size_t prompt) override;
  std::vector<SseEvent> Finish(const v1::Usage& usage) override;
  std::vector<SseEvent> Fail(const absl::Status& status) override;
  absl::Status Accumulate(const v1::GenerateResponse& response, size_t prompt) override;
  std::string FinalJson(const v1::Usage& usage) override;
  size_t AnswerBytes() const override;
  absl::Status MapError(absl::Status status) const override { return params_.Translate(std::move(status)); }

 private:
  enum class ItemType { kReasoning, kMessage, kFunctionCall };
  struct Item {
    Item(ItemType type, std::string id) : type(type), id(std::move(id)) {}

    ItemType type;
    std::string id;
    std::string text;  // the reasoning, the message's text, or the call's arguments
    std::string call_id;
    std::string name;
    std::string status = "in_progress";
  };
  // Events go to `events`, or nowhere when it is null (a non-streaming answer).
  using Events = std::vector<SseEvent>*;

  absl::Status Consume(const v1::GenerateResponse& response, Events events);
  void AddText(ItemType type, std::string_view text, Events events);
  // Appends to the open item's text.
  void AppendText(std::string_view text, Events events);
  absl::Status AddToolCall(const v1::ToolCallDelta& call, Events events);
  // Ends the open item and makes `item` the open one.
  void Open(Item item, Events events);
  // Ends the item still receiving deltas, if any, with `status`.
  void CloseOpen(const std::string& status, Events events);
  // Ends the output (once): the open item, or an empty message (with any whitespace that came) when no
  // item came at all.
  void CloseAll(Events events);

  // {"type": type, "sequence_number": next}; Push frames a complete one into `events` (not null).
  nlohmann::ordered_json NewEvent(const char* type);
  static void Push(Events events, nlohmann::ordered_json event);
  // An output item: as output_item.added shows it (`added`: no content, arguments "") or as it is now.
  nlohmann::ordered_json ItemJson(const Item& item, bool added) const;
  // A message's output_text part or a reasoning item's reasoning_text part.
  nlohmann::ordered_json PartJson(const Item& item) const;
  // The `response` object: with every item so far, and usage when given.
  nlohmann::ordered_json ResponseJson(const std::string& status, const v1::Usage* usage) const;
  std::string FinalStatus() const;

  const std::string id_;
  const int64_t created_at_;
  const std::string model_;
  const nlohmann::ordered_json echo_;
  const ResponsesParamMap params_;
  int64_t sequence_number_ = 0;
  std::vector<Item> items_;
  std::optional<size_t> open_;        // the item still receiving deltas
  std::map<uint32_t, size_t> calls_;  // a tool call's index → its item
  std::string pending_whitespace_;    // content that opened no message yet
  v1::FinishReason finish_reason_ = v1::FINISH_REASON_UNSPECIFIED;
  bool closed_ = false;
  nlohmann::ordered_json error_;  // response.failed: {code, message}
};

}  // namespace llmc::gateway

#endif  // LLMC_GATEWAY_OPENAI_RESPONSES_OUTPUT_H_
