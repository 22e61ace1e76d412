#ifndef LLMC_WORKER_SERVICE_TYPED_OUTPUT_PLAN_H_
#define LLMC_WORKER_SERVICE_TYPED_OUTPUT_PLAN_H_

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "llmc/v1/worker.pb.h"
#include "worker/service/served_model.h"
#include "worker/typed_output/output_format.h"

namespace llmc::worker {

// How one chat request's output is read back as content, reasoning and tool calls (docs/tool-calling.md),
// decided when the request is converted.
struct TypedOutputPlan {
  typed_output::ToolCallFormat format = typed_output::ToolCallFormat::kNone;  // kNone: calls are not parsed
  typed_output::ReasoningMarkers reasoning;                                   // disabled: reasoning is not split off
  bool starts_in_reasoning = false;  // the rendered prompt opened the reasoning block
  std::vector<typed_output::FunctionTool> tools;
  // harmony: its analysis channel is reasoning unless the request asked for none apart.
  bool separate_reasoning = true;
  // Set: the constraint the request runs under instead of its own (the tool-call grammar, with the
  // request's response_format inside it when there was one).
  std::optional<v1::OutputConstraint> constraint;
  // Special tokens that spell the markers: decoded even when special tokens are skipped. Sorted.
  std::vector<int32_t> decoded_special_tokens;
};

// The plan for a chat request whose prompt rendered to `prompt_text`. INVALID_ARGUMENT (naming the field)
// for a tool choice this model cannot honour: a named tool not among the tools, REQUIRED or NAMED without
// tools, or with a response_format.
absl::StatusOr<TypedOutputPlan> PlanTypedOutput(const v1::GenerateRequest& request, const ServedModel& model,
                                                std::string_view prompt_text);

// The special tokens among those that spell `format`'s call markers and the reasoning markers, sorted.
std::vector<int32_t> MarkerSpecialTokens(const ServedModel& model, typed_output::ToolCallFormat format,
                                         const typed_output::ReasoningMarkers& reasoning);

// Whether the last reasoning block the prompt opened is still open at its end (DeepSeek-R1's template ends
// the prompt with "<think>\n"; Qwen3's writes an empty closed block when thinking is off).
bool PromptOpensReasoning(std::string_view prompt_text, const typed_output::ReasoningMarkers& markers);
// Whether the prompt ends with a closed reasoning block, which the template wrote for the model.
bool PromptClosesReasoning(std::string_view prompt_text, const typed_output::ReasoningMarkers& markers);

}  // namespace llmc::worker

#endif  // LLMC_WORKER_SERVICE_TYPED_OUTPUT_PLAN_H_
