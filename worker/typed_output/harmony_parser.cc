// OpenAI's harmony format (gpt-oss): the output is a run of messages, each a header then a body,
//   [<|start|>assistant]<|channel|>CHANNEL[ to=RECIPIENT][ <|constrain|>json]<|message|>BODY<|end|>
// the last one ending with <|return|> (a final answer) or <|call|> (a tool call), both stop tokens the engine
// strips, so the end of the text ends a message too. The prompt ends with <|start|>assistant: the text begins
// with a header. The analysis channel is reasoning, a message to functions.NAME (on the commentary channel) a
// call whose body is its JSON arguments, anything else (final, a commentary preamble) content.
#include <algorithm>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_set>

#include "worker/typed_output/call_parsing.h"

namespace llmc::typed_output::internal {
namespace {

constexpr std::string_view kStart = "<|start|>";
constexpr std::string_view kEnd = "<|end|>";
constexpr std::string_view kMessage = "<|message|>";
constexpr std::string_view kChannel = "<|channel|>";
constexpr std::string_view kReturn = "<|return|>";
constexpr std::string_view kCall = "<|call|>";
constexpr std::string_view kBodyEnds[] = {kEnd, kCall, kReturn, kStart};
constexpr std::string_view kFunctionsPrefix = "functions.";
// A header longer than this is not one: what follows is read as content; so is one of this many bytes without a
// special token (a model that does not write harmony, a random one).
constexpr size_t kMaxHeaderBytes = 4096;
constexpr size_t kMaxPlainHeaderBytes = 256;

// The word after `key` in a header (up to whitespace or the next special token); empty when absent.
std::string_view WordAfter(std::string_view header, std::string_view key) {
  const size_t at = header.find(key);
  if (at == std::string_view::npos) return {};
  std::string_view rest = header.substr(at + key.size());
  size_t end = 0;
  while (end < rest.size() && !IsSpace(rest[end]) && rest.substr(end, 2) != "<|") ++end;
  return rest.substr(0, end);
}

class HarmonyParser : public ToolCallParser {
 public:
  explicit HarmonyParser(ToolCallParserOptions options)
      : separate_reasoning_(options.separate_reasoning), emitter_(CallIdStyle::kOpenAi, options.id_seed) {
    for (const FunctionTool& tool : options.tools) tool_names_.insert(tool.name);
  }

  void Add(std::string_view text, TypedDelta& out) override {
    buffer_.append(text);
    Run(out, /*at_end=*/false);
  }

  void Finish(TypedDelta& out) override {
    Run(out, /*at_end=*/true);
    // A header cut short is markup, not text: dropped; text without any is content.
    if (state_ == State::kHeader && buffer_.find("<|") == std::string::npos) out.content.append(buffer_);
    buffer_.clear();
  }

  uint32_t num_calls() const override { return emitter_.num_calls(); }

 private:
  enum class State { kHeader, kBody, kBetween };
  enum class Body { kContent, kReasoning, kCall };

  void Run(TypedDelta& out, bool at_end) {
    for (bool progress = true; progress;) {
      switch (state_) {
        case State::kHeader:
          progress = StepHeader();
          break;
        case State::kBody:
          progress = StepBody(out, at_end);
          break;
        case State::kBetween:
          progress = StepBetween(at_end);
          break;
      }
    }
  }

  bool StepHeader() {
    // Each decision reads a fixed prefix of the text only, so that how the text arrives does not matter: no
    // special token starting in the first kMaxPlainHeaderBytes, or no <|message|> ending within kMaxHeaderBytes,
    // and it is not a header.
    const std::string_view text = buffer_;
    if (text.size() > kMaxPlainHeaderBytes &&
        text.substr(0, kMaxPlainHeaderBytes + 1).find("<|") == std::string_view::npos) {
      StartBody(Body::kContent, {});
      return true;
    }
    const size_t message = text.substr(0, kMaxHeaderBytes).find(kMessage);
    if (message == std::string_view::npos) {
      if (text.size() < kMaxHeaderBytes) return false;
      StartBody(Body::kContent, {});
      return true;
    }
    const std::string_view header = std::string_view(buffer_).substr(0, message);
    const std::string_view channel = WordAfter(header, kChannel);
    const std::string_view recipient = WordAfter(header, "to=");
    if (!tool_names_.empty() && recipient.substr(0, kFunctionsPrefix.size()) == kFunctionsPrefix) {
      StartBody(Body::kCall, std::string(recipient.substr(kFunctionsPrefix.size())));
    } else {
      StartBody(channel == "analysis" && separate_reasoning_ ? Body::kReasoning : Body::kContent, {});
    }
    buffer_.erase(0, message + kMessage.size());
    return true;
  }

  void StartBody(Body body, std::string call_name) {
    state_ = State::kBody;
    body_ = body;
    call_name_ = std::move(call_name);
    call_text_.clear();
  }

  bool StepBody(TypedDelta& out, bool at_end) {
    size_t end = std::string::npos;
    std::string_view marker;
    for (const std::string_view candidate : kBodyEnds) {
      const size_t at = buffer_.find(candidate);
      if (at < end) {
        end = at;
        marker = candidate;
      }
    }
    if (end == std::string::npos) {
      size_t held = 0;
      if (!at_end) {
        for (const std::string_view candidate : kBodyEnds) {
          held = std::max(held, PartialMarkerSuffix(buffer_, candidate));
        }
      }
      Deliver(std::string_view(buffer_).substr(0, buffer_.size() - held), out);
      buffer_.erase(0, buffer_.size() - held);
      if (at_end) EndMessage(out);
      return false;
    }
    Deliver(std::string_view(buffer_).substr(0, end), out);
    EndMessage(out);
    // A <|start|> without <|end|> before it opens the next message at once.
    buffer_.erase(0, end + (marker == kStart ? 0 : marker.size()));
    state_ = State::kBetween;
    return true;
  }

  bool StepBetween(bool at_end) {
    const size_t space = LeadingSpace(buffer_);
    const std::string_view rest = std::string_view(buffer_).substr(space);
    if (rest.substr(0, kStart.size()) == kStart) {
      buffer_.erase(0, space + kStart.size());
      state_ = State::kHeader;
      return true;
    }
    if (!at_end && (rest.empty() || IsProperPrefix(rest, kStart))) return false;
    if (rest.empty()) return false;
    // Text outside any message: content.
    buffer_.erase(0, space);
    StartBody(Body::kContent, {});
    return true;
  }

  void Deliver(std::string_view text, TypedDelta& out) {
    switch (body_) {
      case Body::kContent:
        out.content.append(text);
        break;
      case Body::kReasoning:
        out.reasoning.append(text);
        break;
      case Body::kCall:
        call_text_.append(text);
        if (call_text_.size() > kMaxCallBytes) {  // given up: the body comes back as content
          out.content.append(call_text_);
          call_text_.clear();
          body_ = Body::kContent;
        }
        break;
    }
  }

  void EndMessage(TypedDelta& out) {
    if (body_ == Body::kCall) {
      const std::optional<nlohmann::ordered_json> arguments = ParseJsonObject(TrimSpace(call_text_));
      // A call of a function the request did not offer is not one the client could make.
      if (arguments.has_value() && tool_names_.count(call_name_) != 0) {
        emitter_.Emit({call_name_, CompactJson(*arguments)}, out);
      } else {
        out.content.append(call_text_);  // a malformed call is not lost
      }
    }
    call_text_.clear();
    body_ = Body::kContent;
  }

  std::unordered_set<std::string> tool_names_;  // none: no calls are read
  const bool separate_reasoning_;
  CallEmitter emitter_;
  State state_ = State::kHeader;
  Body body_ = Body::kContent;
  std::string buffer_;
  std::string call_name_;
  std::string call_text_;
};

}  // namespace

std::unique_ptr<ToolCallParser> MakeHarmonyParser(ToolCallParserOptions options) {
  return std::make_unique<HarmonyParser>(std::move(options));
}

}  // namespace llmc::typed_output::internal
