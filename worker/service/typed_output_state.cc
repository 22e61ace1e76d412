#include "worker/service/typed_output_state.h"

#include <utility>

namespace llmc::worker {
namespace {

void Fill(typed_output::TypedDelta parsed, v1::TypedOutput& typed) {
  typed.mutable_content()->append(parsed.content);
  typed.mutable_reasoning()->append(parsed.reasoning);
  for (typed_output::ToolCallPart& part : parsed.tool_calls) {
    v1::ToolCallDelta& call = *typed.add_tool_calls();
    call.set_index(part.index);
    call.set_id(std::move(part.id));
    call.set_name(std::move(part.name));
    call.set_arguments(std::move(part.arguments));
  }
}

}  // namespace

TypedOutputState::TypedOutputState(const TypedOutputPlan& plan, uint64_t id_seed) : plan_(plan), id_seed_(id_seed) {}

typed_output::ChoiceOutputParser& TypedOutputState::ParserFor(uint32_t choice_index) {
  if (choice_index >= parsers_.size()) parsers_.resize(choice_index + 1);
  std::unique_ptr<typed_output::ChoiceOutputParser>& parser = parsers_[choice_index];
  if (parser == nullptr) {
    typed_output::ToolCallParserOptions options;
    options.tools = plan_.tools;
    options.separate_reasoning = plan_.separate_reasoning;
    // Each choice draws its own call ids.
    options.id_seed = id_seed_ + 0x9E3779B97F4A7C15ull * (choice_index + 1);
    parser = std::make_unique<typed_output::ChoiceOutputParser>(
        plan_.reasoning, plan_.starts_in_reasoning, typed_output::MakeToolCallParser(plan_.format, std::move(options)));
  }
  return *parser;
}

void TypedOutputState::Apply(v1::GenerateResponse& response) {
  for (v1::TokenDelta& delta : *response.mutable_deltas()) {
    typed_output::ChoiceOutputParser& parser = ParserFor(delta.choice_index());
    v1::TypedOutput& typed = *delta.mutable_typed();
    Fill(parser.Add(delta.text()), typed);
    if (delta.finish_reason() == v1::FINISH_REASON_UNSPECIFIED) continue;
    Fill(parser.Finish(), typed);
    if (delta.finish_reason() == v1::FINISH_REASON_STOP && parser.made_tool_calls()) {
      delta.set_finish_reason(v1::FINISH_REASON_TOOL_CALLS);
    }
  }
}

}  // namespace llmc::worker
