#include "worker/typed_output/output_parser.h"

#include <string>
#include <utility>

#include "worker/typed_output/call_parsing.h"

namespace llmc::typed_output {
namespace {

using internal::IsProperPrefix;
using internal::LeadingSpace;
using internal::PartialMarkerSuffix;

// kNone: all text is content.
class PassThroughParser : public ToolCallParser {
 public:
  void Add(std::string_view text, TypedDelta& out) override { out.content.append(text); }
  void Finish(TypedDelta& out) override {}
  uint32_t num_calls() const override { return 0; }
};

}  // namespace

std::unique_ptr<ToolCallParser> MakeToolCallParser(ToolCallFormat format, ToolCallParserOptions options) {
  switch (format) {
    case ToolCallFormat::kNone:
      break;
    case ToolCallFormat::kHermes:
      return internal::MakeHermesParser(std::move(options));
    case ToolCallFormat::kQwen3CoderXml:
      return internal::MakeQwen3CoderParser(std::move(options));
    case ToolCallFormat::kLlama3Json:
      return internal::MakeLlama3JsonParser(std::move(options));
    case ToolCallFormat::kPythonic:
      return internal::MakePythonicParser(std::move(options));
    case ToolCallFormat::kMistral:
      return internal::MakeMistralParser(std::move(options));
    case ToolCallFormat::kDeepSeekV3:
      return internal::MakeDeepSeekV3Parser(std::move(options));
    case ToolCallFormat::kDeepSeekV31:
      return internal::MakeDeepSeekV31Parser(std::move(options));
    case ToolCallFormat::kHarmony:
      return internal::MakeHarmonyParser(std::move(options));
  }
  return std::make_unique<PassThroughParser>();
}

ChoiceOutputParser::ChoiceOutputParser(ReasoningMarkers reasoning, bool starts_in_reasoning,
                                       std::unique_ptr<ToolCallParser> tools)
    : reasoning_(std::move(reasoning)),
      in_reasoning_(reasoning_.enabled() && starts_in_reasoning),
      reasoning_seen_(!reasoning_.enabled() || starts_in_reasoning),
      skip_start_(in_reasoning_ && !reasoning_.start.empty()),
      tools_(tools != nullptr ? std::move(tools) : std::make_unique<PassThroughParser>()) {}

void ChoiceOutputParser::AddToContent(std::string_view text, TypedDelta& out) {
  if (!text.empty()) tools_->Add(text, out);
}

TypedDelta ChoiceOutputParser::Add(std::string_view text) {
  TypedDelta out;
  if (reasoning_seen_ && !in_reasoning_ && !drop_newlines_ && held_.empty()) {
    AddToContent(text, out);
    return out;
  }
  held_.append(text);
  const std::string& start = reasoning_.start;
  const std::string& end = reasoning_.end;
  while (true) {
    if (in_reasoning_) {
      if (skip_start_) {
        const size_t space = LeadingSpace(held_);
        const std::string_view rest = std::string_view(held_).substr(space);
        if (space > internal::kMaxHeldSpace) {
          // Not the start marker.
        } else if (internal::StartsWith(rest, start)) {
          held_.erase(0, space + start.size());
        } else if (IsProperPrefix(rest, start)) {
          return out;
        }
        skip_start_ = false;
      }
      const size_t found = held_.find(end);
      if (found == std::string::npos) {
        const size_t emit = held_.size() - PartialMarkerSuffix(held_, end);
        out.reasoning.append(held_, 0, emit);
        held_.erase(0, emit);
        return out;
      }
      out.reasoning.append(held_, 0, found);
      held_.erase(0, found + end.size());
      in_reasoning_ = false;
      reasoning_seen_ = true;
      drop_newlines_ = true;
      continue;
    }
    if (!reasoning_seen_) {
      // Only a block that opens the output (after whitespace) is reasoning.
      const size_t space = LeadingSpace(held_);
      const std::string_view rest = std::string_view(held_).substr(space);
      const bool may_open = !start.empty() && space <= internal::kMaxHeldSpace;
      if (may_open && internal::StartsWith(rest, start)) {
        held_.erase(0, space + start.size());
        in_reasoning_ = true;
        reasoning_seen_ = true;
        continue;
      }
      if (may_open && IsProperPrefix(rest, start)) return out;
      reasoning_seen_ = true;
      continue;
    }
    if (drop_newlines_) {
      const size_t kept = held_.find_first_not_of("\r\n");
      if (kept == std::string::npos) {
        held_.clear();
        return out;
      }
      held_.erase(0, kept);
      drop_newlines_ = false;
    }
    AddToContent(held_, out);
    held_.clear();
    return out;
  }
}

TypedDelta ChoiceOutputParser::Finish() {
  TypedDelta out;
  if (in_reasoning_) {
    out.reasoning += held_;  // cut short: what was generated stays reasoning
  } else if (!drop_newlines_) {
    AddToContent(held_, out);  // whitespace and a partial start marker
  }
  held_.clear();
  in_reasoning_ = false;
  reasoning_seen_ = true;
  drop_newlines_ = false;
  tools_->Finish(out);
  return out;
}

}  // namespace llmc::typed_output
