// How a chat request's output is read back (worker/service/typed_output_plan.h, typed_output_state.h): which
// parser and grammar a request gets, and how the per-choice parsers fill the deltas the gateway shapes.
#include "worker/service/typed_output_plan.h"

#include "nlohmann/json.hpp"
#include "tests/support/byte_tokenizer.h"
#include "tests/support/catch.h"
#include "worker/service/typed_output_state.h"

namespace llmc::worker {
namespace {

constexpr char kWeatherTools[] =
    R"([{"type":"function","function":{"name":"get_weather","parameters":{"type":"object",)"
    R"("properties":{"city":{"type":"string"}},"required":["city"]}}},)"
    R"({"type":"function","function":{"name":"get_time","strict":true,"parameters":{"type":"object"}}}])";

class PlanFixture {
 protected:
  PlanFixture() : tokenizer_(testing::MakeByteTokenizer()) {
    model_.info.set_name("fake-model");
    model_.tokenizer = tokenizer_.get();
    model_.tool_call_format = typed_output::ToolCallFormat::kHermes;
    model_.reasoning = typed_output::ReasoningMarkers{"<think>", "</think>"};
  }

  static v1::GenerateRequest ChatRequest(v1::ToolChoice choice, const std::string& name = "") {
    v1::GenerateRequest request;
    request.mutable_chat()->set_tools_json(kWeatherTools);
    request.mutable_chat()->set_tool_choice(choice);
    request.mutable_chat()->set_tool_choice_name(name);
    return request;
  }

  std::unique_ptr<tokenizer::Tokenizer> tokenizer_;
  ServedModel model_;
};

TEST_CASE("typed output plan: a prompt opens reasoning when its last start marker is not closed", "[unit][tools]") {
  const typed_output::ReasoningMarkers think{"<think>", "</think>"};
  CHECK(PromptOpensReasoning("<|im_start|>assistant\n<think>\n", think));
  CHECK_FALSE(PromptOpensReasoning("<|im_start|>assistant\n<think>\n\n</think>\n\n", think));
  CHECK(PromptOpensReasoning("<think>old</think> answer <|im_start|>assistant\n<think>", think));
  CHECK_FALSE(PromptOpensReasoning("<|im_start|>assistant\n", think));
  CHECK_FALSE(PromptOpensReasoning("<think>", typed_output::ReasoningMarkers{}));
  CHECK(PromptClosesReasoning("<|im_start|>assistant\n<think>\n\n</think>\n\n", think));
  CHECK_FALSE(PromptClosesReasoning("<think>a</think> b<|im_start|>assistant\n", think));
}

TEST_CASE_METHOD(PlanFixture, "typed output plan: a reasoning block the template closed leaves nothing to parse",
                 "[unit][tools]") {
  absl::StatusOr<TypedOutputPlan> plan =
      PlanTypedOutput(ChatRequest(v1::TOOL_CHOICE_REQUIRED), model_, "assistant\n<think>\n\n</think>\n\n");
  REQUIRE(plan.ok());
  CHECK_FALSE(plan->reasoning.enabled());
  REQUIRE(plan->constraint.has_value());
  CHECK(plan->constraint->tool_calls().reasoning_end().empty());
}

TEST_CASE_METHOD(PlanFixture, "typed output plan: auto with a strict tool gets the lazy tool-call grammar",
                 "[unit][tools]") {
  absl::StatusOr<TypedOutputPlan> plan = PlanTypedOutput(ChatRequest(v1::TOOL_CHOICE_AUTO), model_, "prompt");
  REQUIRE(plan.ok());
  CHECK(plan->format == typed_output::ToolCallFormat::kHermes);
  CHECK(plan->tools.size() == 2);
  CHECK(plan->reasoning.enabled());
  CHECK_FALSE(plan->starts_in_reasoning);
  REQUIRE(plan->constraint.has_value());
  const v1::ToolCallConstraint& calls = plan->constraint->tool_calls();
  CHECK(calls.format() == "hermes");
  CHECK(calls.choice() == v1::TOOL_CHOICE_AUTO);
  CHECK(calls.parallel());
  CHECK(calls.reasoning_end() == "</think>");
  CHECK(nlohmann::json::parse(calls.tools_json()).size() == 2);
}

TEST_CASE_METHOD(PlanFixture, "typed output plan: required and named choices are forced; none parses nothing",
                 "[unit][tools]") {
  v1::GenerateRequest named = ChatRequest(v1::TOOL_CHOICE_NAMED, "get_weather");
  named.mutable_chat()->set_parallel_tool_calls(false);
  absl::StatusOr<TypedOutputPlan> plan = PlanTypedOutput(named, model_, "<think>\n");
  REQUIRE(plan.ok());
  CHECK(plan->starts_in_reasoning);
  REQUIRE(plan->constraint.has_value());
  CHECK(plan->constraint->tool_calls().choice() == v1::TOOL_CHOICE_NAMED);
  CHECK(plan->constraint->tool_calls().name() == "get_weather");
  CHECK_FALSE(plan->constraint->tool_calls().parallel());
  CHECK(plan->constraint->tool_calls().starts_in_reasoning());
  CHECK(plan->constraint->source() == "tools");

  plan = PlanTypedOutput(ChatRequest(v1::TOOL_CHOICE_NONE), model_, "prompt");
  REQUIRE(plan.ok());
  CHECK(plan->format == typed_output::ToolCallFormat::kNone);
  CHECK_FALSE(plan->constraint.has_value());

  v1::GenerateRequest no_reasoning = ChatRequest(v1::TOOL_CHOICE_NONE);
  no_reasoning.mutable_chat()->set_separate_reasoning(false);
  plan = PlanTypedOutput(no_reasoning, model_, "prompt");
  REQUIRE(plan.ok());
  CHECK_FALSE(plan->reasoning.enabled());
}

TEST_CASE_METHOD(PlanFixture, "typed output plan: refusals name tool_choice", "[unit][tools]") {
  absl::StatusOr<TypedOutputPlan> plan =
      PlanTypedOutput(ChatRequest(v1::TOOL_CHOICE_NAMED, "get_stock"), model_, "prompt");
  REQUIRE_FALSE(plan.ok());
  CHECK(plan.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(plan.status().message()), Catch::Contains("get_stock"));

  v1::GenerateRequest no_tools = ChatRequest(v1::TOOL_CHOICE_REQUIRED);
  no_tools.mutable_chat()->clear_tools_json();
  CHECK_FALSE(PlanTypedOutput(no_tools, model_, "prompt").ok());

  v1::GenerateRequest with_format = ChatRequest(v1::TOOL_CHOICE_REQUIRED);
  with_format.mutable_sampling()->mutable_constraint()->set_json_object(true);
  plan = PlanTypedOutput(with_format, model_, "prompt");
  REQUIRE_FALSE(plan.ok());
  CHECK_THAT(std::string(plan.status().message()), Catch::Contains("response_format"));
}

TEST_CASE_METHOD(PlanFixture, "typed output plan: a response_format on a reasoning model applies after reasoning",
                 "[unit][tools]") {
  v1::GenerateRequest request;
  request.mutable_sampling()->mutable_constraint()->set_json_object(true);
  request.mutable_sampling()->mutable_constraint()->set_source("response_format");
  absl::StatusOr<TypedOutputPlan> plan = PlanTypedOutput(request, model_, "prompt");
  REQUIRE(plan.ok());
  REQUIRE(plan->constraint.has_value());
  CHECK(plan->constraint->source() == "response_format");
  CHECK(plan->constraint->tool_calls().content().json_object());
  CHECK(plan->constraint->tool_calls().reasoning_start() == "<think>");
  CHECK(plan->constraint->tool_calls().tools_json().empty());

  model_.reasoning = typed_output::ReasoningMarkers{};
  plan = PlanTypedOutput(request, model_, "prompt");
  REQUIRE(plan.ok());
  CHECK_FALSE(plan->constraint.has_value());  // the request's own constraint stays

  // With tools, the answer is the formatted content or calls.
  *request.mutable_chat() = ChatRequest(v1::TOOL_CHOICE_AUTO).chat();
  plan = PlanTypedOutput(request, model_, "prompt");
  REQUIRE(plan.ok());
  REQUIRE(plan->constraint.has_value());
  CHECK(plan->constraint->tool_calls().content().json_object());
  CHECK_FALSE(plan->constraint->tool_calls().tools_json().empty());

  // vLLM's guided_* shape the whole output: no calls beside it (the parser still reads them out of the text).
  request.mutable_sampling()->mutable_constraint()->set_source("guided_regex");
  plan = PlanTypedOutput(request, model_, "prompt");
  REQUIRE(plan.ok());
  CHECK_FALSE(plan->constraint.has_value());
  CHECK(plan->format == typed_output::ToolCallFormat::kHermes);
}

TEST_CASE_METHOD(PlanFixture, "typed output plan: parallel_tool_calls false constrains auto calls to one",
                 "[unit][tools]") {
  v1::GenerateRequest request = ChatRequest(v1::TOOL_CHOICE_AUTO);
  request.mutable_chat()->set_tools_json(
      R"([{"type":"function","function":{"name":"get_weather","parameters":{"type":"object"}}}])");
  absl::StatusOr<TypedOutputPlan> plan = PlanTypedOutput(request, model_, "prompt");
  REQUIRE(plan.ok());
  CHECK_FALSE(plan->constraint.has_value());  // not strict, parallel: the model's text is only parsed
  request.mutable_chat()->set_parallel_tool_calls(false);
  plan = PlanTypedOutput(request, model_, "prompt");
  REQUIRE(plan.ok());
  REQUIRE(plan->constraint.has_value());
  CHECK_FALSE(plan->constraint->tool_calls().parallel());
  CHECK(plan->constraint->tool_calls().choice() == v1::TOOL_CHOICE_AUTO);
}

v1::GenerateResponse Step(uint32_t choice, const std::string& text,
                          v1::FinishReason finish = v1::FINISH_REASON_UNSPECIFIED) {
  v1::GenerateResponse response;
  v1::TokenDelta& delta = *response.add_deltas();
  delta.set_choice_index(choice);
  delta.set_text(text);
  delta.set_finish_reason(finish);
  return response;
}

TEST_CASE_METHOD(PlanFixture, "typed output state: each choice's text becomes reasoning, content and calls",
                 "[unit][tools]") {
  absl::StatusOr<TypedOutputPlan> plan = PlanTypedOutput(ChatRequest(v1::TOOL_CHOICE_AUTO), model_, "prompt");
  REQUIRE(plan.ok());
  TypedOutputState state(*plan, 7);
  const std::string call =
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>";
  std::string reasoning, content[2], arguments;
  std::vector<std::string> names, ids;
  v1::FinishReason finish[2] = {v1::FINISH_REASON_UNSPECIFIED, v1::FINISH_REASON_UNSPECIFIED};
  const auto take = [&](v1::GenerateResponse response) {
    state.Apply(response);
    for (const v1::TokenDelta& delta : response.deltas()) {
      REQUIRE(delta.has_typed());
      if (delta.choice_index() == 0) reasoning += delta.typed().reasoning();
      content[delta.choice_index()] += delta.typed().content();
      for (const v1::ToolCallDelta& part : delta.typed().tool_calls()) {
        CHECK(delta.choice_index() == 0);
        if (!part.id().empty()) {
          ids.push_back(part.id());
          names.push_back(part.name());
        }
        arguments += part.arguments();
      }
      if (delta.finish_reason() != v1::FINISH_REASON_UNSPECIFIED) finish[delta.choice_index()] = delta.finish_reason();
    }
  };
  const std::string choice0 = "<think>hmm</think>\n\nLet me look." + call;
  for (size_t i = 0; i < choice0.size(); i += 5) take(Step(0, choice0.substr(i, 5)));
  take(Step(1, "Just text <tool"));
  take(Step(0, "", v1::FINISH_REASON_STOP));
  take(Step(1, "", v1::FINISH_REASON_STOP));
  CHECK(reasoning == "hmm");
  CHECK(content[0] == "Let me look.");
  CHECK(content[1] == "Just text <tool");
  REQUIRE(names == std::vector<std::string>{"get_weather"});
  CHECK(ids[0].rfind("call_", 0) == 0);
  CHECK(nlohmann::json::parse(arguments) == nlohmann::json{{"city", "Paris"}});
  CHECK(finish[0] == v1::FINISH_REASON_TOOL_CALLS);
  CHECK(finish[1] == v1::FINISH_REASON_STOP);
}

TEST_CASE_METHOD(PlanFixture, "typed output plan: harmony parses every chat, refuses what it cannot constrain",
                 "[unit][tools]") {
  model_.tool_call_format = typed_output::ToolCallFormat::kHarmony;
  model_.reasoning = typed_output::ReasoningMarkers{};
  // Without tools its channels are still read: analysis is reasoning.
  v1::GenerateRequest plain;
  absl::StatusOr<TypedOutputPlan> plan = PlanTypedOutput(plain, model_, "<|start|>assistant");
  REQUIRE(plan.ok());
  CHECK(plan->format == typed_output::ToolCallFormat::kHarmony);
  CHECK(plan->tools.empty());
  CHECK(plan->separate_reasoning);
  CHECK_FALSE(plan->constraint.has_value());
  plain.mutable_chat()->set_separate_reasoning(false);
  CHECK_FALSE(PlanTypedOutput(plain, model_, "")->separate_reasoning);

  plan = PlanTypedOutput(ChatRequest(v1::TOOL_CHOICE_AUTO), model_, "");
  REQUIRE_FALSE(plan.ok());  // get_time is strict
  CHECK_THAT(std::string(plan.status().message()), Catch::Contains("strict"));
  v1::GenerateRequest request = ChatRequest(v1::TOOL_CHOICE_AUTO);
  request.mutable_chat()->set_tools_json(
      R"([{"type":"function","function":{"name":"get_weather","parameters":{"type":"object"}}}])");
  plan = PlanTypedOutput(request, model_, "");
  REQUIRE(plan.ok());
  CHECK(plan->tools.size() == 1);
  CHECK_FALSE(plan->constraint.has_value());
  request.mutable_chat()->set_tool_choice(v1::TOOL_CHOICE_REQUIRED);
  plan = PlanTypedOutput(request, model_, "");
  REQUIRE_FALSE(plan.ok());
  CHECK(plan.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(plan.status().message()), Catch::Contains("tool_choice"));
  request.mutable_chat()->set_tool_choice(v1::TOOL_CHOICE_NONE);
  plan = PlanTypedOutput(request, model_, "");
  REQUIRE(plan.ok());
  CHECK(plan->tools.empty());  // calls are not read: a message to a function is content
  v1::GenerateRequest formatted;
  formatted.mutable_sampling()->mutable_constraint()->set_json_object(true);
  formatted.mutable_sampling()->mutable_constraint()->set_source("response_format");
  plan = PlanTypedOutput(formatted, model_, "");
  REQUIRE_FALSE(plan.ok());
  CHECK_THAT(std::string(plan.status().message()), Catch::Contains("response_format"));
}

}  // namespace
}  // namespace llmc::worker
