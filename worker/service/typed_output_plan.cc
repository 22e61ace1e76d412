#include "worker/service/typed_output_plan.h"

#include <algorithm>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/status_macros.h"

namespace llmc::worker {
namespace {

using typed_output::ToolCallFormat;

// Ids of the special tokens among `text`'s tokens.
void AddSpecialTokensOf(absl::string_view text, const ServedModel& model, std::vector<int32_t>& out) {
  absl::StatusOr<std::vector<int32_t>> ids = model.tokenizer->Encode(text, /*add_special_tokens=*/false);
  if (!ids.ok()) return;
  for (const int32_t id : *ids) {
    if (model.tokenizer->IsSpecial(id)) out.push_back(id);
  }
}

absl::Status CheckToolChoice(const v1::ChatInput& chat, const std::vector<typed_output::FunctionTool>& tools,
                             bool has_response_format) {
  const bool forced = chat.tool_choice() == v1::TOOL_CHOICE_REQUIRED || chat.tool_choice() == v1::TOOL_CHOICE_NAMED;
  if (!forced) return absl::OkStatus();
  if (tools.empty()) {
    return absl::InvalidArgumentError(
        "tool_choice: a required or named tool choice needs at least one function in 'tools'");
  }
  if (has_response_format) {
    return absl::InvalidArgumentError(
        "tool_choice: a required or named tool choice forces a tool call, so it cannot be combined with "
        "response_format or another structured-output constraint");
  }
  if (chat.tool_choice() == v1::TOOL_CHOICE_NAMED &&
      std::none_of(tools.begin(), tools.end(),
                   [&](const typed_output::FunctionTool& tool) { return tool.name == chat.tool_choice_name(); })) {
    return absl::InvalidArgumentError(
        absl::StrCat("tool_choice: names the function '", chat.tool_choice_name(), "', which is not among the tools"));
  }
  return absl::OkStatus();
}

}  // namespace

std::vector<int32_t> MarkerSpecialTokens(const ServedModel& model, ToolCallFormat format,
                                         const typed_output::ReasoningMarkers& reasoning) {
  std::vector<int32_t> ids;
  for (const std::string& marker : typed_output::ToolCallMarkers(format)) AddSpecialTokensOf(marker, model, ids);
  if (reasoning.enabled()) {
    AddSpecialTokensOf(reasoning.start, model, ids);
    AddSpecialTokensOf(reasoning.end, model, ids);
  }
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return ids;
}

bool PromptClosesReasoning(std::string_view prompt_text, const typed_output::ReasoningMarkers& markers) {
  if (!markers.enabled()) return false;
  return absl::EndsWith(absl::StripTrailingAsciiWhitespace(absl::string_view(prompt_text.data(), prompt_text.size())),
                        markers.end);
}

bool PromptOpensReasoning(std::string_view prompt_text, const typed_output::ReasoningMarkers& markers) {
  if (!markers.enabled() || markers.start.empty()) return false;
  const size_t start = prompt_text.rfind(markers.start);
  if (start == std::string_view::npos) return false;
  return prompt_text.find(markers.end, start + markers.start.size()) == std::string_view::npos;
}

namespace {

// harmony (gpt-oss): every answer is channels, so every chat is parsed (calls only with tools). Its calls and
// final channel are not constrained yet: what would need a grammar around the channels is refused by name.
// parallel_tool_calls needs nothing: <|call|> is one of its stop tokens, so an answer holds at most one call.
absl::StatusOr<TypedOutputPlan> PlanHarmony(const v1::GenerateRequest& request, const ServedModel& model,
                                            TypedOutputPlan plan) {
  const v1::ChatInput& chat = request.chat();
  // vLLM's structured_outputs and guided_* shape the whole output, channels included, as for other formats;
  // response_format would shape the final channel's text alone, which needs a grammar around the channels.
  if (request.sampling().has_constraint() &&
      absl::StartsWith(request.sampling().constraint().source(), "response_format")) {
    return absl::InvalidArgumentError(absl::StrCat(
        request.sampling().constraint().source(),
        ": response_format is not supported for this model's harmony format (gpt-oss) yet; structured_outputs "
        "shapes the whole output"));
  }
  if (!plan.tools.empty()) {
    if (chat.tool_choice() == v1::TOOL_CHOICE_REQUIRED || chat.tool_choice() == v1::TOOL_CHOICE_NAMED) {
      return absl::InvalidArgumentError(
          "tool_choice: only \"auto\" and \"none\" are supported for this model's harmony format (gpt-oss)");
    }
    if (std::any_of(plan.tools.begin(), plan.tools.end(),
                    [](const typed_output::FunctionTool& tool) { return tool.strict; })) {
      return absl::InvalidArgumentError(
          "tools: strict functions cannot be enforced for this model's harmony format (gpt-oss) yet; leave out "
          "\"strict\"");
    }
  }
  plan.format = ToolCallFormat::kHarmony;
  plan.reasoning = typed_output::ReasoningMarkers{};
  plan.separate_reasoning = !chat.has_separate_reasoning() || chat.separate_reasoning();
  plan.decoded_special_tokens = MarkerSpecialTokens(model, plan.format, plan.reasoning);
  return plan;
}

}  // namespace

absl::StatusOr<TypedOutputPlan> PlanTypedOutput(const v1::GenerateRequest& request, const ServedModel& model,
                                                std::string_view prompt_text) {
  TypedOutputPlan plan;
  const v1::ChatInput& chat = request.chat();
  if (!chat.has_separate_reasoning() || chat.separate_reasoning()) plan.reasoning = model.reasoning;
  plan.starts_in_reasoning = PromptOpensReasoning(prompt_text, plan.reasoning);
  // The template wrote the reasoning block itself (Qwen3 with enable_thinking false ends the prompt with an
  // empty one): the answer has none to parse or allow.
  if (PromptClosesReasoning(prompt_text, plan.reasoning)) plan.reasoning = typed_output::ReasoningMarkers{};

  absl::StatusOr<std::vector<typed_output::FunctionTool>> tools = typed_output::ReadFunctionTools(chat.tools_json());
  if (!tools.ok()) return absl::InvalidArgumentError(absl::StrCat("tools: ", tools.status().message()));
  const bool has_constraint = request.sampling().has_constraint();
  RETURN_IF_ERROR(CheckToolChoice(chat, *tools, has_constraint));
  if (chat.tool_choice() != v1::TOOL_CHOICE_NONE && !tools->empty()) {
    plan.format = model.tool_call_format;
    plan.tools = *std::move(tools);
  }
  if (model.tool_call_format == ToolCallFormat::kHarmony) return PlanHarmony(request, model, std::move(plan));

  const bool forced = chat.tool_choice() == v1::TOOL_CHOICE_REQUIRED || chat.tool_choice() == v1::TOOL_CHOICE_NAMED;
  const bool any_strict = std::any_of(plan.tools.begin(), plan.tools.end(),
                                      [](const typed_output::FunctionTool& tool) { return tool.strict; });
  const bool single_call = chat.has_parallel_tool_calls() && !chat.parallel_tool_calls();
  // OpenAI's response_format shapes the answer's text, so with tools the answer is that text or calls; vLLM's
  // structured_outputs and guided_* shape the whole output, calls or not.
  const bool answer_format =
      has_constraint && absl::StartsWith(request.sampling().constraint().source(), "response_format");
  // Calls the model may make are constrained when a function is strict, when at most one is allowed, and when
  // the answer without calls has a response_format. On a reasoning model, a structured-output constraint
  // applies to the answer after the reasoning block.
  const bool lazy_calls =
      plan.format != ToolCallFormat::kNone && (answer_format || (!has_constraint && (any_strict || single_call)));
  const bool wrap_constraint = has_constraint && plan.reasoning.enabled();
  if (forced || lazy_calls || wrap_constraint) {
    v1::OutputConstraint constraint;
    v1::ToolCallConstraint& calls = *constraint.mutable_tool_calls();
    calls.set_format(std::string(typed_output::ToolCallFormatName(plan.format)));
    if (forced || lazy_calls) calls.set_tools_json(chat.tools_json());
    calls.set_choice(forced ? chat.tool_choice() : v1::TOOL_CHOICE_AUTO);
    calls.set_name(chat.tool_choice_name());
    calls.set_parallel(!chat.has_parallel_tool_calls() || chat.parallel_tool_calls());
    calls.set_reasoning_start(plan.reasoning.start);
    calls.set_reasoning_end(plan.reasoning.end);
    calls.set_starts_in_reasoning(plan.starts_in_reasoning);
    if (has_constraint) {
      *calls.mutable_content() = request.sampling().constraint();
      constraint.set_source(request.sampling().constraint().source());
    } else {
      constraint.set_source("tools");
    }
    plan.constraint = std::move(constraint);
  }

  plan.decoded_special_tokens = MarkerSpecialTokens(model, plan.format, plan.reasoning);
  return plan;
}

}  // namespace llmc::worker
