#include "worker/typed_output/call_parsing.h"

#include <algorithm>
#include <utility>

#include "common/json_shape.h"

namespace llmc::typed_output::internal {

bool IsSpace(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t' || c == '\f' || c == '\v'; }

size_t LeadingSpace(std::string_view text) {
  size_t i = 0;
  while (i < text.size() && IsSpace(text[i])) ++i;
  return i;
}

std::string_view TrimSpace(std::string_view text) {
  text.remove_prefix(LeadingSpace(text));
  while (!text.empty() && IsSpace(text.back())) text.remove_suffix(1);
  return text;
}

bool IsAllSpace(std::string_view text) { return LeadingSpace(text) == text.size(); }

size_t PartialMarkerSuffix(std::string_view text, std::string_view marker) {
  if (marker.empty()) return 0;
  for (size_t length = std::min(text.size(), marker.size() - 1); length > 0; --length) {
    if (text.substr(text.size() - length) == marker.substr(0, length)) return length;
  }
  return 0;
}

bool IsProperPrefix(std::string_view text, std::string_view marker) {
  return text.size() < marker.size() && marker.substr(0, text.size()) == text;
}

std::optional<nlohmann::ordered_json> ParseJsonObject(std::string_view text) {
  if (FindNulByte(text).has_value()) return std::nullopt;
  nlohmann::ordered_json parsed =
      nlohmann::ordered_json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded() || !parsed.is_object()) return std::nullopt;
  return parsed;
}

std::string CompactJson(const nlohmann::ordered_json& value) {
  return value.dump(-1, ' ', /*ensure_ascii=*/false, nlohmann::ordered_json::error_handler_t::replace);
}

std::optional<std::string> ArgumentsText(const nlohmann::ordered_json& value) {
  if (value.is_object()) return CompactJson(value);
  if (value.is_string()) {
    const std::string& quoted = value.get_ref<const std::string&>();
    std::optional<nlohmann::ordered_json> object = ParseJsonObject(quoted);
    if (object.has_value()) return CompactJson(*object);
  }
  return std::nullopt;
}

bool IsPlausibleName(std::string_view name) {
  if (name.empty() || name.size() > 256) return false;
  for (char c : name) {
    const unsigned char u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f || IsSpace(c)) return false;
    if (std::string_view("\"'<>[]{}(),;=`\\").find(c) != std::string_view::npos) return false;
  }
  return true;
}

std::optional<ParsedCall> CallFromJsonObject(const nlohmann::ordered_json& object, bool exact_keys) {
  if (!object.is_object()) return std::nullopt;
  const auto name = object.find("name");
  if (name == object.end() || !name->is_string()) return std::nullopt;
  ParsedCall call;
  call.name = name->get<std::string>();
  if (!IsPlausibleName(call.name)) return std::nullopt;
  auto arguments = object.find("arguments");
  if (arguments == object.end())
    arguments = object.find("parameters");
  else if (object.contains("parameters"))
    return std::nullopt;  // which one?
  if (exact_keys && (arguments == object.end() || object.size() != 2 || !arguments->is_object())) return std::nullopt;
  if (arguments == object.end()) {
    call.arguments = "{}";
    return call;
  }
  std::optional<std::string> text = ArgumentsText(*arguments);
  if (!text.has_value()) return std::nullopt;
  call.arguments = std::move(*text);
  return call;
}

void JsonExtentScanner::Reset(size_t start) {
  pos_ = start;
  depth_ = 0;
  in_string_ = false;
  escaped_ = false;
}

std::optional<size_t> JsonExtentScanner::Scan(std::string_view buffer) {
  for (; pos_ < buffer.size(); ++pos_) {
    const char c = buffer[pos_];
    if (in_string_) {
      if (escaped_) {
        escaped_ = false;
      } else if (c == '\\') {
        escaped_ = true;
      } else if (c == '"') {
        in_string_ = false;
      }
      continue;
    }
    if (c == '"') {
      in_string_ = true;
    } else if (c == '{' || c == '[') {
      ++depth_;
    } else if ((c == '}' || c == ']') && depth_ > 0 && --depth_ == 0) {
      return ++pos_;
    }
  }
  return std::nullopt;
}

CallEmitter::CallEmitter(CallIdStyle style, uint64_t seed) : style_(style), random_(seed) {}

std::string CallEmitter::NewId() {
  static constexpr std::string_view kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  const size_t length = style_ == CallIdStyle::kMistral ? 9 : 24;
  while (true) {
    std::string id = style_ == CallIdStyle::kMistral ? "" : "call_";
    for (size_t i = 0; i < length; ++i) id += kAlphabet[random_() % kAlphabet.size()];
    if (ids_.insert(id).second) return id;
  }
}

void CallEmitter::Emit(ParsedCall call, TypedDelta& out) {
  ToolCallPart part;
  part.index = num_calls_++;
  part.id = NewId();
  part.name = std::move(call.name);
  part.arguments = std::move(call.arguments);
  out.tool_calls.push_back(std::move(part));
}

// ---- BlockCallParser ----

BlockCallParser::BlockCallParser(BlockMarkers markers, ToolCallParserOptions options)
    : markers_(std::move(markers)), tools_(std::move(options.tools)), emitter_(CallIdStyle::kOpenAi, options.id_seed) {}

const std::string& BlockCallParser::OpeningMarker() const {
  return markers_.section_begin.empty() ? markers_.block_begin : markers_.section_begin;
}

void BlockCallParser::Add(std::string_view text, TypedDelta& out) {
  buffer_.append(text);
  Run(out);
}

void BlockCallParser::Run(TypedDelta& out) {
  while (true) {
    bool progressed = false;
    switch (state_) {
      case State::kText:
        progressed = StepText(out);
        break;
      case State::kSection:
        progressed = StepSection(out);
        break;
      case State::kBlock:
        progressed = StepBlock(out);
        break;
    }
    if (!progressed) return;
  }
}

bool BlockCallParser::StepText(TypedDelta& out) {
  const std::string& marker = OpeningMarker();
  if (after_call_) {
    // Whitespace after a call is held: dropped if another call follows, content if text does.
    const size_t space = LeadingSpace(buffer_);
    const std::string_view rest = std::string_view(buffer_).substr(space);
    if (space > kMaxHeldSpace) {
      after_call_ = false;
    } else if (rest.substr(0, marker.size()) == marker) {
      buffer_.erase(0, space);
      after_call_ = false;
    } else if (IsProperPrefix(rest, marker)) {
      return false;
    } else {
      after_call_ = false;
    }
  }
  const size_t found = buffer_.find(marker);
  if (found != std::string::npos) {
    out.content.append(buffer_, 0, found);
    buffer_.erase(0, found + marker.size());
    raw_ = marker;
    section_calls_ = 0;
    search_from_ = 0;
    state_ = markers_.section_begin.empty() ? State::kBlock : State::kSection;
    return true;
  }
  const size_t emit = buffer_.size() - PartialMarkerSuffix(buffer_, marker);
  out.content.append(buffer_, 0, emit);
  buffer_.erase(0, emit);
  return false;
}

bool BlockCallParser::StepSection(TypedDelta& out) {
  const size_t space = LeadingSpace(buffer_);
  const std::string_view rest = std::string_view(buffer_).substr(space);
  if (space > kMaxHeldSpace) {
    // Not a section after all (below).
  } else if (rest.substr(0, markers_.block_begin.size()) == markers_.block_begin) {
    raw_.append(buffer_, 0, space + markers_.block_begin.size());
    buffer_.erase(0, space + markers_.block_begin.size());
    search_from_ = 0;
    state_ = State::kBlock;
    return true;
  } else if (rest.substr(0, markers_.section_end.size()) == markers_.section_end) {
    const size_t consumed = space + markers_.section_end.size();
    if (section_calls_ == 0) {
      // A section without a single call is not one.
      out.content += raw_;
      out.content.append(buffer_, 0, consumed);
    }
    buffer_.erase(0, consumed);
    raw_.clear();
    after_call_ = section_calls_ > 0;
    state_ = State::kText;
    return true;
  } else if (IsProperPrefix(rest, markers_.block_begin) || IsProperPrefix(rest, markers_.section_end)) {
    return false;
  }
  // Not a section after all: what was consumed is content, the rest is read as text again.
  out.content += raw_;
  raw_.clear();
  after_call_ = false;
  state_ = State::kText;
  return true;
}

bool BlockCallParser::StepBlock(TypedDelta& out) {
  const std::string& end = markers_.block_end;
  const size_t found = buffer_.find(end, search_from_);
  if (found == std::string::npos) {
    if (raw_.size() + buffer_.size() > kMaxCallBytes) {
      out.content += raw_;
      out.content += buffer_;
      raw_.clear();
      buffer_.clear();
      after_call_ = false;
      state_ = State::kText;
      return false;
    }
    search_from_ = buffer_.size() >= end.size() ? buffer_.size() - end.size() + 1 : 0;
    return false;
  }
  const size_t consumed = found + end.size();
  std::optional<std::vector<ParsedCall>> calls = ParseBlock(std::string_view(buffer_).substr(0, found));
  const bool in_section = !markers_.section_begin.empty();
  if (calls.has_value() && !calls->empty()) {
    for (ParsedCall& call : *calls) emitter_.Emit(std::move(call), out);
    section_calls_ += static_cast<uint32_t>(calls->size());
    after_call_ = !in_section;
  } else {
    // Malformed: the block comes back as content exactly as generated; a section goes on with its next block.
    out.content += raw_;
    out.content.append(buffer_, 0, consumed);
    after_call_ = false;
  }
  raw_.clear();
  buffer_.erase(0, consumed);
  search_from_ = 0;
  state_ = in_section ? State::kSection : State::kText;
  return true;
}

void BlockCallParser::Finish(TypedDelta& out) {
  switch (state_) {
    case State::kText:
      if (!after_call_ || !IsAllSpace(buffer_)) out.content += buffer_;
      break;
    case State::kSection:
      if (section_calls_ == 0 || !raw_.empty() || !IsAllSpace(buffer_)) {
        out.content += raw_;
        out.content += buffer_;
      }
      break;
    case State::kBlock:
      out.content += raw_;
      out.content += buffer_;
      break;
  }
  raw_.clear();
  buffer_.clear();
  search_from_ = 0;
  after_call_ = false;
  state_ = State::kText;
}

// ---- WholeTextCallParser ----

WholeTextCallParser::WholeTextCallParser(std::vector<std::string> starts, CallIdStyle style,
                                         ToolCallParserOptions options)
    : starts_(std::move(starts)), tools_(std::move(options.tools)), emitter_(style, options.id_seed) {}

void WholeTextCallParser::Add(std::string_view text, TypedDelta& out) {
  if (state_ == State::kContent) {
    out.content.append(text);
    return;
  }
  buffer_.append(text);
  if (state_ == State::kUndecided) {
    const size_t space = LeadingSpace(buffer_);
    const std::string_view rest = std::string_view(buffer_).substr(space);
    bool may_start = false;
    for (const std::string& start : starts_) {
      if (space > kMaxHeldSpace) break;
      if (rest.substr(0, start.size()) == start) {
        state_ = State::kCandidate;
        break;
      }
      may_start = may_start || IsProperPrefix(rest, start);
    }
    if (state_ == State::kUndecided && !may_start) {
      out.content += buffer_;
      buffer_.clear();
      state_ = State::kContent;
      return;
    }
  }
  if (state_ == State::kCandidate && buffer_.size() > kMaxCallBytes) {
    out.content += buffer_;
    buffer_.clear();
    state_ = State::kContent;
  }
}

void WholeTextCallParser::Finish(TypedDelta& out) {
  if (state_ == State::kCandidate) {
    std::optional<std::vector<ParsedCall>> calls = ParseWhole(buffer_);
    if (calls.has_value() && !calls->empty()) {
      for (ParsedCall& call : *calls) emitter_.Emit(std::move(call), out);
      buffer_.clear();
    }
  }
  out.content += buffer_;
  buffer_.clear();
  state_ = State::kUndecided;
}

}  // namespace llmc::typed_output::internal
