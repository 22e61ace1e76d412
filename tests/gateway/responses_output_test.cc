#include "gateway/openai/responses_output.h"

#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "gateway/openai/openai_error.h"
#include "nlohmann/json.hpp"
#include "tests/support/catch.h"

namespace llmc::gateway {
namespace {

using nlohmann::json;

ResponsesRequest Request(const json& extra = json::object()) {
  json body = {{"model", "qwen"}, {"input", "hi"}};
  for (const auto& [key, value] : extra.items()) body[key] = value;
  absl::StatusOr<ResponsesRequest> request = ParseResponsesRequest(body.dump());
  INFO(request.status().ToString());
  REQUIRE(request.ok());
  return *std::move(request);
}

struct TypedCall {
  uint32_t index = 0;
  std::string id;
  std::string name;
  std::string arguments;
};

// One worker message with one typed delta for choice 0.
v1::GenerateResponse Typed(const std::string& reasoning, const std::string& content,
                           const std::vector<TypedCall>& calls = {},
                           v1::FinishReason finish = v1::FINISH_REASON_UNSPECIFIED) {
  v1::GenerateResponse response;
  v1::TokenDelta* delta = response.add_deltas();
  delta->set_text(reasoning + content);  // what the model wrote; the typed parts are what counts
  v1::TypedOutput* typed = delta->mutable_typed();
  typed->set_reasoning(reasoning);
  typed->set_content(content);
  for (const TypedCall& call : calls) {
    v1::ToolCallDelta* out = typed->add_tool_calls();
    out->set_index(call.index);
    out->set_id(call.id);
    out->set_name(call.name);
    out->set_arguments(call.arguments);
  }
  delta->set_finish_reason(finish);
  return response;
}

// One worker message with plain text (no typed parts), as for a model without output parsers.
v1::GenerateResponse Text(const std::string& text, v1::FinishReason finish = v1::FINISH_REASON_UNSPECIFIED,
                          uint32_t choice = 0) {
  v1::GenerateResponse response;
  v1::TokenDelta* delta = response.add_deltas();
  delta->set_choice_index(choice);
  delta->set_text(text);
  delta->set_finish_reason(finish);
  return response;
}

v1::Usage Usage(uint32_t prompt, uint32_t completion, uint32_t cached = 0) {
  v1::Usage usage;
  usage.set_prompt_tokens(prompt);
  usage.set_completion_tokens(completion);
  usage.set_total_tokens(prompt + completion);
  usage.set_cached_prompt_tokens(cached);
  return usage;
}

// Reasoning, a message, and two tool calls whose arguments come in pieces.
std::vector<v1::GenerateResponse> ReasonTalkAndCall() {
  return {
      Typed("Let me ", ""),
      Typed("think.", ""),
      Typed("", "Check"),
      Typed("", "ing."),
      Typed("", "\n\n", {{0, "call_1", "get_weather", ""}}),
      Typed("", "", {{0, "", "", R"({"city":)"}}),
      Typed("", "", {{0, "", "", R"("Paris"})"}}),
      Typed("", "", {{1, "call_2", "get_time", "{}"}}, v1::FINISH_REASON_TOOL_CALLS),
  };
}

json FinalOf(ResponsesOutputBuilder& builder, const std::vector<v1::GenerateResponse>& script,
             const v1::Usage& usage = Usage(10, 5)) {
  for (const v1::GenerateResponse& response : script) REQUIRE(builder.Accumulate(response, 0).ok());
  return json::parse(builder.FinalJson(usage));
}

struct Event {
  std::string name;
  json data;
};

// The stream for `script`: Start, each message, Finish.
std::vector<Event> StreamOf(ResponsesOutputBuilder& builder, const std::vector<v1::GenerateResponse>& script,
                            const v1::Usage& usage = Usage(10, 5)) {
  std::vector<SseEvent> raw = builder.Start();
  for (const v1::GenerateResponse& response : script) {
    absl::StatusOr<std::vector<SseEvent>> events = builder.OnResponse(response, 0);
    REQUIRE(events.ok());
    for (SseEvent& event : *events) raw.push_back(std::move(event));
  }
  for (SseEvent& event : builder.Finish(usage)) raw.push_back(std::move(event));
  std::vector<Event> events;
  for (const SseEvent& event : raw) events.push_back({event.name, json::parse(event.data)});
  return events;
}

std::vector<std::string> TypesOf(const std::vector<Event>& events) {
  std::vector<std::string> types;
  for (const Event& event : events) types.push_back(event.name);
  return types;
}

// What must hold of every stream: names match types, sequence numbers count from 0, every event of an
// item carries the id and index output_item.added gave it, the deltas add up to the done texts, each
// output_item.done shows the item as the final response does, and the final response ends the stream.
void CheckStreamInvariants(const std::vector<Event>& events) {
  REQUIRE(events.size() >= 3);
  std::map<int64_t, std::string> item_ids;     // output_index → id
  std::map<int64_t, std::string> accumulated;  // output_index → the deltas so far
  std::map<int64_t, json> done_items;
  for (size_t i = 0; i < events.size(); ++i) {
    const Event& event = events[i];
    INFO("event " << i << ": " << event.data.dump());
    CHECK(event.data["type"] == event.name);
    CHECK(event.data["sequence_number"] == static_cast<int64_t>(i));
    if (event.name == "response.output_item.added") {
      const int64_t index = event.data["output_index"];
      CHECK(index == static_cast<int64_t>(item_ids.size()));  // items are added in order
      item_ids[index] = event.data["item"]["id"];
      CHECK(event.data["item"]["status"] == "in_progress");
      continue;
    }
    if (!event.data.contains("output_index")) continue;
    const int64_t index = event.data["output_index"];
    REQUIRE(item_ids.count(index) == 1);
    if (event.data.contains("item_id")) CHECK(event.data["item_id"] == item_ids[index]);
    if (absl::EndsWith(event.name, ".delta")) accumulated[index] += event.data["delta"].get<std::string>();
    if (event.name == "response.output_text.done" || event.name == "response.reasoning_text.done") {
      CHECK(event.data["text"] == accumulated[index]);
    }
    if (event.name == "response.function_call_arguments.done") CHECK(event.data["arguments"] == accumulated[index]);
    if (event.name == "response.output_item.done") {
      CHECK(event.data["item"]["id"] == item_ids[index]);
      done_items[index] = event.data["item"];
    }
  }
  CHECK(events[0].name == "response.created");
  CHECK(events[1].name == "response.in_progress");
  const json& final_response = events.back().data["response"];
  if (events.back().name == "response.failed") return;
  REQUIRE(final_response["output"].size() == item_ids.size());
  for (size_t index = 0; index < item_ids.size(); ++index) {
    CHECK(final_response["output"][index] == done_items[static_cast<int64_t>(index)]);
  }
}

TEST_CASE("responses_output: a plain answer is one message, the response object echoes the request",
          "[unit][responses]") {
  const ResponsesRequest request = Request({{"instructions", "Be brief."},
                                            {"temperature", 0.25},
                                            {"max_output_tokens", 100},
                                            {"metadata", {{"trace", "t1"}}},
                                            {"user", "u1"}});
  ResponsesOutputBuilder builder(request, "resp_abc", 1700000000);
  const json out = FinalOf(builder, {Text("Hel"), Text("lo", v1::FINISH_REASON_STOP)}, Usage(12, 2, 8));
  CHECK(out["id"] == "resp_abc");
  CHECK(out["object"] == "response");
  CHECK(out["created_at"] == 1700000000);
  CHECK(out["status"] == "completed");
  CHECK(out["model"] == "qwen");
  CHECK(out["error"].is_null());
  CHECK(out["incomplete_details"].is_null());
  CHECK(out["background"] == false);
  REQUIRE(out["output"].size() == 1);
  const json& message = out["output"][0];
  CHECK(absl::StartsWith(message["id"].get<std::string>(), "msg_"));
  CHECK(message["type"] == "message");
  CHECK(message["role"] == "assistant");
  CHECK(message["status"] == "completed");
  CHECK(
      message["content"] ==
      json::array(
          {{{"type", "output_text"}, {"text", "Hello"}, {"annotations", json::array()}, {"logprobs", json::array()}}}));
  CHECK(out["usage"] == json{{"input_tokens", 12},
                             {"input_tokens_details", {{"cached_tokens", 8}}},
                             {"output_tokens", 2},
                             {"output_tokens_details", {{"reasoning_tokens", 0}}},
                             {"total_tokens", 14}});
  CHECK(out["instructions"] == "Be brief.");
  CHECK(out["temperature"] == 0.25);
  CHECK(out["max_output_tokens"] == 100);
  CHECK(out["metadata"] == json{{"trace", "t1"}});
  CHECK(out["user"] == "u1");
  CHECK(out["store"] == false);
  CHECK(out["previous_response_id"].is_null());
  CHECK(out["tool_choice"] == "auto");
  CHECK(out["tools"] == json::array());
  CHECK(out["text"] == json{{"format", {{"type", "text"}}}, {"verbosity", "medium"}});
  CHECK(out["truncation"] == "disabled");
  CHECK(out["parallel_tool_calls"] == true);
}

TEST_CASE("responses_output: reasoning, a message and tool calls become output items in order", "[unit][responses]") {
  const ResponsesRequest request = Request();
  ResponsesOutputBuilder builder(request, "resp_abc", 1700000000);
  const json out = FinalOf(builder, ReasonTalkAndCall());
  CHECK(out["status"] == "completed");
  const json& output = out["output"];
  REQUIRE(output.size() == 4);
  CHECK(output[0]["type"] == "reasoning");
  CHECK(absl::StartsWith(output[0]["id"].get<std::string>(), "rs_"));
  CHECK(output[0]["summary"] == json::array());
  CHECK(output[0]["content"] == json::array({{{"type", "reasoning_text"}, {"text", "Let me think."}}}));
  CHECK(output[1]["type"] == "message");
  CHECK(output[1]["content"][0]["text"] == "Checking.\n\n");
  CHECK(output[2] == json{{"id", output[2]["id"]},
                          {"type", "function_call"},
                          {"status", "completed"},
                          {"call_id", "call_1"},
                          {"name", "get_weather"},
                          {"arguments", R"({"city":"Paris"})"}});
  CHECK(absl::StartsWith(output[2]["id"].get<std::string>(), "fc_"));
  CHECK(output[3]["call_id"] == "call_2");
  CHECK(output[3]["name"] == "get_time");
  CHECK(output[3]["arguments"] == "{}");
  CHECK(output[3]["status"] == "completed");
  // Ids are unique.
  std::set<std::string> ids;
  for (const json& item : output) ids.insert(item["id"].get<std::string>());
  CHECK(ids.size() == 4);
}

TEST_CASE("responses_output: the stream's events, in order", "[unit][responses]") {
  const ResponsesRequest request = Request();
  ResponsesOutputBuilder builder(request, "resp_abc", 1700000000);
  const std::vector<Event> events = StreamOf(builder, ReasonTalkAndCall());
  CHECK(TypesOf(events) == std::vector<std::string>{
                               "response.created",
                               "response.in_progress",
                               "response.output_item.added",  // reasoning
                               "response.content_part.added",
                               "response.reasoning_text.delta",
                               "response.reasoning_text.delta",
                               "response.reasoning_text.done",
                               "response.content_part.done",
                               "response.output_item.done",
                               "response.output_item.added",  // message
                               "response.content_part.added",
                               "response.output_text.delta",
                               "response.output_text.delta",
                               "response.output_text.delta",
                               "response.output_text.done",
                               "response.content_part.done",
                               "response.output_item.done",
                               "response.output_item.added",  // get_weather
                               "response.function_call_arguments.delta",
                               "response.function_call_arguments.delta",
                               "response.function_call_arguments.done",
                               "response.output_item.done",
                               "response.output_item.added",  // get_time
                               "response.function_call_arguments.delta",
                               "response.function_call_arguments.done",
                               "response.output_item.done",
                               "response.completed",
                           });
  CheckStreamInvariants(events);

  const json& created = events[0].data["response"];
  CHECK(created["id"] == "resp_abc");
  CHECK(created["status"] == "in_progress");
  CHECK(created["output"] == json::array());
  CHECK(created["usage"].is_null());
  CHECK(events[2].data["item"] == json{{"id", events[2].data["item"]["id"]},
                                       {"type", "reasoning"},
                                       {"status", "in_progress"},
                                       {"summary", json::array()},
                                       {"content", json::array()}});
  CHECK(events[3].data["part"] == json{{"type", "reasoning_text"}, {"text", ""}});
  CHECK(events[10].data["part"] ==
        json{{"type", "output_text"}, {"text", ""}, {"annotations", json::array()}, {"logprobs", json::array()}});
  CHECK(events[11].data["logprobs"] == json::array());
  CHECK(events[11].data["content_index"] == 0);
  const json& call_added = events[17].data["item"];
  CHECK(call_added["type"] == "function_call");
  CHECK(call_added["call_id"] == "call_1");
  CHECK(call_added["name"] == "get_weather");
  CHECK(call_added["arguments"] == "");
  CHECK(events[20].data["name"] == "get_weather");

  const json& completed = events.back().data["response"];
  CHECK(completed["status"] == "completed");
  CHECK(completed["usage"]["total_tokens"] == 15);
  CHECK(completed["output"].size() == 4);

  // The same messages, not streamed, give the same output (ids aside).
  ResponsesOutputBuilder whole(request, "resp_abc", 1700000000);
  json expected = FinalOf(whole, ReasonTalkAndCall());
  json streamed = completed;
  for (json* response : {&expected, &streamed}) {
    for (json& item : (*response)["output"]) item.erase("id");
  }
  CHECK(streamed == expected);
}

TEST_CASE("responses_output: whitespace between reasoning and a call opens no message", "[unit][responses]") {
  const std::vector<v1::GenerateResponse> script = {
      Typed("plan", ""),
      Typed("", "\n\n"),
      Typed("", "", {{0, "call_1", "f", "{}"}}),
      Typed("", "\n", {}, v1::FINISH_REASON_TOOL_CALLS),
  };
  ResponsesOutputBuilder builder(Request(), "resp_abc", 1);
  const json out = FinalOf(builder, script);
  REQUIRE(out["output"].size() == 2);
  CHECK(out["output"][0]["type"] == "reasoning");
  CHECK(out["output"][1]["type"] == "function_call");

  ResponsesOutputBuilder streaming(Request(), "resp_abc", 1);
  const std::vector<Event> events = StreamOf(streaming, script);
  CheckStreamInvariants(events);
  for (const Event& event : events) CHECK(event.name != "response.output_text.delta");

  // Whitespace that leads a message's words stays with them.
  ResponsesOutputBuilder leading(Request(), "resp_abc", 1);
  const json led = FinalOf(leading, {Typed("", "\n"), Typed("", "Hi", {}, v1::FINISH_REASON_STOP)});
  CHECK(led["output"][0]["content"][0]["text"] == "\nHi");
}

TEST_CASE("responses_output: max_output_tokens running out makes the response incomplete", "[unit][responses]") {
  const std::vector<v1::GenerateResponse> script = {Typed("", "Once upon"),
                                                    Typed("", " a", {}, v1::FINISH_REASON_LENGTH)};
  ResponsesOutputBuilder builder(Request({{"max_output_tokens", 2}}), "resp_abc", 1);
  const json out = FinalOf(builder, script, Usage(4, 2));
  CHECK(out["status"] == "incomplete");
  CHECK(out["incomplete_details"] == json{{"reason", "max_output_tokens"}});
  CHECK(out["output"][0]["status"] == "incomplete");
  CHECK(out["output"][0]["content"][0]["text"] == "Once upon a");

  ResponsesOutputBuilder streaming(Request({{"max_output_tokens", 2}}), "resp_abc", 1);
  const std::vector<Event> events = StreamOf(streaming, script, Usage(4, 2));
  CheckStreamInvariants(events);
  CHECK(events.back().name == "response.incomplete");
  CHECK(events.back().data["response"]["status"] == "incomplete");
  CHECK(events.back().data["response"]["incomplete_details"]["reason"] == "max_output_tokens");
  CHECK(events[events.size() - 2].data["item"]["status"] == "incomplete");
}

TEST_CASE("responses_output: an answer without typed parts streams its text as the message", "[unit][responses]") {
  ResponsesOutputBuilder builder(Request({{"stream", true}}), "resp_abc", 1);
  const std::vector<Event> events = StreamOf(builder, {Text("Hel"), Text(""), Text("lo", v1::FINISH_REASON_STOP)});
  CheckStreamInvariants(events);
  CHECK(TypesOf(events) == std::vector<std::string>{"response.created", "response.in_progress",
                                                    "response.output_item.added", "response.content_part.added",
                                                    "response.output_text.delta", "response.output_text.delta",
                                                    "response.output_text.done", "response.content_part.done",
                                                    "response.output_item.done", "response.completed"});
  CHECK(events.back().data["response"]["output"][0]["content"][0]["text"] == "Hello");
}

TEST_CASE("responses_output: an empty answer still has its message", "[unit][responses]") {
  ResponsesOutputBuilder builder(Request(), "resp_abc", 1);
  const json out = FinalOf(builder, {Text("", v1::FINISH_REASON_STOP)}, Usage(3, 1));
  REQUIRE(out["output"].size() == 1);
  CHECK(out["output"][0]["content"][0]["text"] == "");
  CHECK(out["status"] == "completed");

  ResponsesOutputBuilder streaming(Request(), "resp_abc", 1);
  const std::vector<Event> events = StreamOf(streaming, {Text("", v1::FINISH_REASON_STOP)});
  CheckStreamInvariants(events);
  CHECK(events.back().data["response"]["output"].size() == 1);
}

TEST_CASE("responses_output: a failure after the stream began ends it with response.failed", "[unit][responses]") {
  ResponsesOutputBuilder builder(Request({{"stream", true}}), "resp_abc", 1);
  std::vector<SseEvent> raw = builder.Start();
  absl::StatusOr<std::vector<SseEvent>> more = builder.OnResponse(Typed("", "Hi"), 0);
  REQUIRE(more.ok());
  for (SseEvent& event : *more) raw.push_back(std::move(event));
  for (SseEvent& event : builder.Fail(absl::UnavailableError("the worker went away"))) raw.push_back(std::move(event));
  std::vector<Event> events;
  for (const SseEvent& event : raw) events.push_back({event.name, json::parse(event.data)});
  CheckStreamInvariants(events);
  CHECK(events.back().name == "response.failed");
  const json& response = events.back().data["response"];
  CHECK(response["status"] == "failed");
  CHECK(response["error"] == json{{"code", "server_error"}, {"message", "the worker went away"}});
  CHECK(response["usage"].is_null());
  REQUIRE(response["output"].size() == 1);
  CHECK(response["output"][0]["status"] == "incomplete");
  CHECK(response["output"][0]["content"][0]["text"] == "Hi");

  ResponsesOutputBuilder busy(Request({{"stream", true}}), "resp_abc", 1);
  busy.Start();
  const std::vector<SseEvent> failed = busy.Fail(absl::ResourceExhaustedError("queue full"));
  REQUIRE(failed.size() == 1);
  CHECK(json::parse(failed[0].data)["response"]["error"]["code"] == "rate_limit_exceeded");
  CHECK(json::parse(failed[0].data)["sequence_number"] == 2);
}

TEST_CASE("responses_output: messages a Responses request cannot have are errors", "[unit][responses]") {
  ResponsesOutputBuilder builder(Request(), "resp_abc", 1);
  CHECK(builder.Accumulate(Text("x", v1::FINISH_REASON_UNSPECIFIED, /*choice=*/1), 0).code() ==
        absl::StatusCode::kInternal);
  CHECK(builder.Accumulate(Text("", v1::FINISH_REASON_ABORT), 0).code() == absl::StatusCode::kUnavailable);
  CHECK(builder.Accumulate(Text("", v1::FINISH_REASON_ERROR), 0).code() == absl::StatusCode::kInternal);

  // Arguments of a call after the next item began.
  ResponsesOutputBuilder late(Request(), "resp_abc", 1);
  REQUIRE(late.OnResponse(Typed("", "", {{0, "call_1", "f", "{"}}), 0).ok());
  REQUIRE(late.OnResponse(Typed("", "", {{1, "call_2", "g", "{}"}}), 0).ok());
  CHECK(late.OnResponse(Typed("", "", {{0, "", "", "}"}}), 0).status().code() == absl::StatusCode::kInternal);
}

TEST_CASE("responses_output: a call without an id from the worker gets one", "[unit][responses]") {
  ResponsesOutputBuilder builder(Request(), "resp_abc", 1);
  const json out = FinalOf(builder, {Typed("", "", {{0, "", "f", "{}"}}, v1::FINISH_REASON_TOOL_CALLS)});
  CHECK(absl::StartsWith(out["output"][0]["call_id"].get<std::string>(), "call_"));
}

TEST_CASE("responses_output: errors name the Responses fields", "[unit][responses]") {
  ResponsesOutputBuilder builder(Request(), "resp_abc", 1);
  const absl::Status mapped =
      builder.MapError(InvalidParameter("response_format", "response_format: unsupported schema keyword"));
  CHECK(ParameterOf(mapped) == "text.format");
  CHECK(std::string(mapped.message()) == "text.format: unsupported schema keyword");
  CHECK(NewResponsesId().size() == 5 + 32);
  CHECK(absl::StartsWith(NewResponsesId(), "resp_"));
}

TEST_CASE("responses_output: named events are framed as event and data lines", "[unit][responses]") {
  CHECK(FormatSseEvent(R"({"type":"response.created"})", "response.created") ==
        "event: response.created\ndata: {\"type\":\"response.created\"}\n\n");
  CHECK(FormatSseEvent("x", "bad\nname") == "event: bad\ndata: x\n\n");
  CHECK(FormatSseEvent("[DONE]") == "data: [DONE]\n\n");
  const SseEvent data_only("[DONE]");
  CHECK(data_only.name.empty());
}

}  // namespace
}  // namespace llmc::gateway
