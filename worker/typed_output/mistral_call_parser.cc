// Mistral's tool calls: [TOOL_CALLS] followed by either a JSON array [{"name": "f", "arguments": {...}}, ...]
// (v3 tokenizers, Mistral Nemo) or name[ARGS]{...} (v11+ tokenizers; optionally name[CALL_ID]id[ARGS]{...}), the
// next call introduced by another [TOOL_CALLS] or directly by its name. A call ends where its JSON value closes.

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/json_shape.h"
#include "worker/typed_output/call_parsing.h"

namespace llmc::typed_output::internal {
namespace {

constexpr std::string_view kToolCalls = "[TOOL_CALLS]";
constexpr std::string_view kArgs = "[ARGS]";
constexpr std::string_view kCallId = "[CALL_ID]";

bool IsNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' || c == '.';
}

bool IsAlnum(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'); }

// What a call's text (after [TOOL_CALLS], or right after the previous call) begins with.
struct Header {
  enum Kind { kNeedMore, kNo, kArray, kNamed } kind = kNo;
  size_t value_start = 0;  // the offset of the JSON value's opening bracket
  std::string_view name;   // kNamed
};

Header Verdict(Header::Kind kind) {
  Header header;
  header.kind = kind;
  return header;
}

// Bounded: what it waits on is at most some whitespace, a name and an id (kNeedMore never lasts long).
Header ReadHeader(std::string_view text, bool allow_array) {
  constexpr size_t kMaxName = 256;
  constexpr size_t kMaxCallId = 64;
  Header header;
  size_t i = LeadingSpace(text);
  if (i > kMaxHeldSpace) return Verdict(Header::kNo);
  if (i == text.size()) return Verdict(Header::kNeedMore);
  if (text[i] == '[') {
    if (!allow_array) return Verdict(Header::kNo);
    header.kind = Header::kArray;
    header.value_start = i;
    return header;
  }
  const size_t name_start = i;
  while (i < text.size() && IsNameChar(text[i])) ++i;
  if (i - name_start > kMaxName) return Verdict(Header::kNo);
  if (i == text.size()) return Verdict(Header::kNeedMore);
  header.name = text.substr(name_start, i - name_start);
  if (header.name.empty()) return Verdict(Header::kNo);
  std::string_view rest = text.substr(i);
  if (StartsWith(rest, kCallId)) {
    i += kCallId.size();
    const size_t id_start = i;
    while (i < text.size() && IsAlnum(text[i])) ++i;
    if (i - id_start > kMaxCallId) return Verdict(Header::kNo);
    rest = text.substr(i);
    if (!StartsWith(rest, kArgs)) return Verdict(IsProperPrefix(rest, kArgs) ? Header::kNeedMore : Header::kNo);
  } else if (!StartsWith(rest, kArgs)) {
    return Verdict(IsProperPrefix(rest, kArgs) || IsProperPrefix(rest, kCallId) ? Header::kNeedMore : Header::kNo);
  }
  i += kArgs.size();
  const size_t space = LeadingSpace(text.substr(i));
  if (space > kMaxHeldSpace) return Verdict(Header::kNo);
  i += space;
  if (i == text.size()) return Verdict(Header::kNeedMore);
  if (text[i] != '{') return Verdict(Header::kNo);
  header.kind = Header::kNamed;
  header.value_start = i;
  return header;
}

class MistralParser : public ToolCallParser {
 public:
  explicit MistralParser(ToolCallParserOptions options) : emitter_(CallIdStyle::kMistral, options.id_seed) {}

  void Add(std::string_view text, TypedDelta& out) override {
    buffer_.append(text);
    while (true) {
      bool progressed = false;
      switch (state_) {
        case State::kText:
          progressed = StepText(out);
          break;
        case State::kCall:
          progressed = StepCall(out);
          break;
        case State::kAfterCall:
          progressed = StepAfterCall(out);
          break;
      }
      if (!progressed) return;
    }
  }

  void Finish(TypedDelta& out) override {
    if (state_ != State::kAfterCall || !IsAllSpace(buffer_)) {
      out.content += raw_;
      out.content += buffer_;
    }
    raw_.clear();
    buffer_.clear();
    scanning_ = false;
    state_ = State::kText;
  }

  uint32_t num_calls() const override { return emitter_.num_calls(); }

 private:
  enum class State { kText, kCall, kAfterCall };

  bool StepText(TypedDelta& out) {
    const size_t found = buffer_.find(kToolCalls);
    if (found != std::string::npos) {
      out.content.append(buffer_, 0, found);
      buffer_.erase(0, found + kToolCalls.size());
      raw_ = std::string(kToolCalls);
      scanning_ = false;
      state_ = State::kCall;
      return true;
    }
    const size_t emit = buffer_.size() - PartialMarkerSuffix(buffer_, kToolCalls);
    out.content.append(buffer_, 0, emit);
    buffer_.erase(0, emit);
    return false;
  }

  // After a call: another [TOOL_CALLS], another name[ARGS]{...}, or content.
  bool StepAfterCall(TypedDelta& out) {
    const size_t space = LeadingSpace(buffer_);
    const std::string_view rest = std::string_view(buffer_).substr(space);
    if (space <= kMaxHeldSpace && StartsWith(rest, kToolCalls)) {
      buffer_.erase(0, space);  // whitespace between calls is not content
      state_ = State::kText;
      return true;
    }
    if (space <= kMaxHeldSpace && IsProperPrefix(rest, kToolCalls)) return false;
    const Header header = ReadHeader(buffer_, /*allow_array=*/false);
    if (header.kind == Header::kNeedMore) return false;
    raw_.clear();
    scanning_ = false;
    state_ = header.kind == Header::kNamed ? State::kCall : State::kText;
    return true;
  }

  bool StepCall(TypedDelta& out) {
    if (!scanning_) {
      const Header header = ReadHeader(buffer_, /*allow_array=*/!raw_.empty());
      if (header.kind == Header::kNeedMore) return false;
      if (header.kind == Header::kNo) {
        // Not a call: the marker is content, and what follows is read as text again.
        out.content += raw_;
        raw_.clear();
        state_ = State::kText;
        return true;
      }
      array_ = header.kind == Header::kArray;
      name_ = std::string(header.name);
      value_start_ = header.value_start;
      scanner_.Reset(value_start_);
      scanning_ = true;
    }
    const std::optional<size_t> end = scanner_.Scan(buffer_);
    if (!end.has_value()) {
      if (raw_.size() + buffer_.size() <= kMaxCallBytes) return false;
      return GiveUp(out);
    }
    std::optional<std::vector<ParsedCall>> calls = ReadCalls(std::string_view(buffer_).substr(0, *end));
    scanning_ = false;
    if (calls.has_value() && !calls->empty()) {
      for (ParsedCall& call : *calls) emitter_.Emit(std::move(call), out);
      state_ = State::kAfterCall;
    } else {
      out.content += raw_;
      out.content.append(buffer_, 0, *end);
      state_ = State::kText;
    }
    raw_.clear();
    buffer_.erase(0, *end);
    return true;
  }

  std::optional<std::vector<ParsedCall>> ReadCalls(std::string_view text) const {
    const std::string_view value = text.substr(value_start_);
    std::vector<ParsedCall> calls;
    if (!array_) {
      std::optional<nlohmann::ordered_json> object = ParseJsonObject(value);
      if (!object.has_value() || !IsPlausibleName(name_)) return std::nullopt;
      calls.push_back(ParsedCall{name_, CompactJson(*object)});
      return calls;
    }
    if (FindNulByte(value).has_value()) return std::nullopt;
    const nlohmann::ordered_json array =
        nlohmann::ordered_json::parse(value.begin(), value.end(), nullptr, /*allow_exceptions=*/false);
    if (array.is_discarded() || !array.is_array()) return std::nullopt;
    for (const nlohmann::ordered_json& element : array) {
      std::optional<ParsedCall> call = CallFromJsonObject(element, /*exact_keys=*/false);
      if (!call.has_value()) return std::nullopt;
      calls.push_back(std::move(*call));
    }
    return calls;
  }

  // A call too large to hold: content, and the rest of it is read as text.
  bool GiveUp(TypedDelta& out) {
    out.content += raw_;
    out.content += buffer_;
    raw_.clear();
    buffer_.clear();
    scanning_ = false;
    state_ = State::kText;
    return false;
  }

  CallEmitter emitter_;
  State state_ = State::kText;
  std::string buffer_;  // text not yet decided (in kCall: after the marker)
  std::string raw_;     // the [TOOL_CALLS] marker of the call being read: content if it fails
  bool scanning_ = false;
  bool array_ = false;
  std::string name_;
  size_t value_start_ = 0;
  JsonExtentScanner scanner_;
};

}  // namespace

std::unique_ptr<ToolCallParser> MakeMistralParser(ToolCallParserOptions options) {
  return std::make_unique<MistralParser>(std::move(options));
}

}  // namespace llmc::typed_output::internal
