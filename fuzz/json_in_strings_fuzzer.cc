// Fuzzes JSON that arrives inside a JSON string: a tool call's `arguments` in a chat message (Chat
// Completions) or a `function_call` input item (Responses), which the gateway parses again to hand the
// template an object, and the worker's JSON fields from gRPC. The input is the text of that string.
//
// Checked:
//   - the one-pass shape check (common/json_shape.h) agrees with a SAX walk of nlohmann's parser: a valid
//     JSON text passes exactly when it nests at most limits::kMaxJsonDepth deep and no object has more
//     than limits::kMaxJsonObjectKeys keys;
//   - a chat or Responses request carrying the text either parses or is INVALID_ARGUMENT with a message
//     naming the arguments' field, and nothing throws;
//   - an accepted request never carries arguments past the limits, and a valid JSON object within them is
//     accepted and reaches the worker as that object, keys in the client's order; a text that is not JSON
//     (one with a NUL byte after a valid object included) reaches it as the client's string;
//   - what the gateway accepts, the worker accepts too: the messages it forwards pass the worker's own
//     shape check (worker/service/chat_rendering.cc), so a request is never refused on the far side of
//     the gRPC hop for a limit the gateway let through (it once was: arguments 64 deep made the messages
//     69 deep, past the worker's 64).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "common/json_shape.h"
#include "common/request_limits.h"
#include "gateway/openai/openai_error.h"
#include "gateway/openai/openai_request.h"
#include "gateway/openai/responses_request.h"
#include "nlohmann/json.hpp"

namespace {

using nlohmann::json;
using nlohmann::ordered_json;

[[noreturn]] void Fail(const char* what, std::string_view text, std::string_view detail = {}) {
  std::cerr << what << "\n" << detail << "\ntext (" << text.size() << " bytes): " << text.substr(0, 2000) << "\n";
  std::abort();
}

// Measures nesting and keys per object while nlohmann's parser walks the text (its SAX parser keeps an
// explicit stack, so a deep text does not recurse).
class ShapeMeasure : public nlohmann::json_sax<json> {
 public:
  size_t max_depth() const { return max_depth_; }
  size_t max_keys() const { return max_keys_; }

  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override { return Open(true); }
  bool key(string_t&) override {
    max_keys_ = std::max(max_keys_, ++keys_.back());
    return true;
  }
  bool end_object() override { return Close(); }
  bool start_array(std::size_t) override { return Open(false); }
  bool end_array() override { return Close(); }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override { return false; }

 private:
  bool Open(bool) {
    keys_.push_back(0);
    max_depth_ = std::max(max_depth_, keys_.size());
    return true;
  }
  bool Close() {
    keys_.pop_back();
    return true;
  }

  std::vector<size_t> keys_;
  size_t max_depth_ = 0;
  size_t max_keys_ = 0;
};

struct Measured {
  bool valid = false;
  bool within_limits = false;
};

Measured Measure(const std::string& text) {
  ShapeMeasure measure;
  Measured out;
  // nlohmann's parser stops at a NUL byte as at the end of the input, which JSON does not allow: a text
  // holding one is not JSON whatever comes before it (common/json_shape.h).
  out.valid = !llmc::FindNulByte(text).has_value() &&
              json::sax_parse(text, &measure, json::input_format_t::json, /*strict=*/true);
  out.within_limits =
      measure.max_depth() <= llmc::limits::kMaxJsonDepth && measure.max_keys() <= llmc::limits::kMaxJsonObjectKeys;
  return out;
}

std::string ChatBody(const json& arguments) {
  const json body = {
      {"model", "m"},
      {"messages",
       {{{"role", "user"}, {"content", "hi"}},
        {{"role", "assistant"},
         {"content", nullptr},
         {"tool_calls",
          {{{"id", "call_1"}, {"type", "function"}, {"function", {{"name", "f"}, {"arguments", arguments}}}}}}},
        {{"role", "tool"}, {"tool_call_id", "call_1"}, {"content", "ok"}}}}};
  return body.dump();
}

std::string ResponsesBody(const json& arguments) {
  const json body = {{"model", "m"},
                     {"input",
                      {{{"type", "message"}, {"role", "user"}, {"content", "hi"}},
                       {{"type", "function_call"}, {"call_id", "c1"}, {"name", "f"}, {"arguments", arguments}},
                       {{"type", "function_call_output"}, {"call_id", "c1"}, {"output", "ok"}}}}};
  return body.dump();
}

// The arguments the worker receives in the forwarded messages (the assistant message's first call).
const ordered_json* ForwardedArguments(const ordered_json& messages) {
  for (const ordered_json& message : messages) {
    const auto calls = message.find("tool_calls");
    if (calls == message.end() || !calls->is_array() || calls->empty()) continue;
    const auto function = (*calls)[0].find("function");
    if (function == (*calls)[0].end()) return nullptr;
    const auto arguments = function->find("arguments");
    return arguments == function->end() ? nullptr : &*arguments;
  }
  return nullptr;
}

void CheckAccepted(const llmc::v1::GenerateRequest& generate, const std::string& text, const Measured& measured) {
  if (!text.empty() &&
      (!llmc::CheckJsonShapeLimits(text, "arguments").ok() || (measured.valid && !measured.within_limits))) {
    Fail("arguments past the JSON limits were accepted", text);
  }
  const std::string& messages_json = generate.chat().messages_json();
  const absl::Status worker_check =
      llmc::CheckJsonShapeLimits(messages_json, "chat.messages_json", llmc::limits::kMaxMessagesJsonDepth);
  if (!worker_check.ok()) Fail("the gateway forwards messages the worker's shape check refuses", text);
  const ordered_json messages = ordered_json::parse(messages_json);
  const ordered_json* forwarded = ForwardedArguments(messages);
  if (forwarded == nullptr) Fail("the tool call's arguments were not forwarded", text);
  if (measured.valid && measured.within_limits) {
    const ordered_json expected = ordered_json::parse(text);
    if (expected.is_object() && *forwarded != expected) Fail("forwarded arguments differ from the client's", text);
  } else if (!measured.valid && !text.empty() && *forwarded != ordered_json(text)) {
    Fail("arguments that are not JSON were not forwarded as the client's string", text);
  }
}

void CheckRefused(const absl::Status& status, const std::string& text, const Measured& measured) {
  if (status.code() != absl::StatusCode::kInvalidArgument || status.message().empty()) {
    Fail("a refusal that is not INVALID_ARGUMENT with a message", text);
  }
  if (measured.valid && measured.within_limits) Fail("valid arguments within the limits were refused", text);
  if (!absl::StrContains(llmc::gateway::ParameterOf(status), "arguments")) {
    Fail("a refusal of the arguments names another field", text, status.ToString());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // The fuzzer's bytes as the client would send them: a JSON string holds UTF-8, so invalid bytes are
  // replaced before the body is written, and the text checked is the string as the gateway reads it.
  const std::string raw(reinterpret_cast<const char*>(data), size);
  const std::string quoted = json(raw).dump(-1, ' ', false, json::error_handler_t::replace);
  const std::string text = json::parse(quoted).get<std::string>();

  const Measured measured = Measure(text);
  const bool shape_ok = llmc::CheckJsonShapeLimits(text, "text").ok();
  if (measured.valid && shape_ok != measured.within_limits) {
    Fail(shape_ok ? "the shape check passed a text past the limits" : "the shape check refused a text within them",
         text);
  }

  const auto chat = llmc::gateway::ParseChatCompletionRequest(ChatBody(text));
  if (chat.ok()) {
    CheckAccepted(chat->generate, text, measured);
  } else {
    CheckRefused(chat.status(), text, measured);
  }
  const auto responses = llmc::gateway::ParseResponsesRequest(ResponsesBody(text));
  if (responses.ok()) {
    CheckAccepted(responses->chat.generate, text, measured);
  } else {
    CheckRefused(responses.status(), text, measured);
  }
  return 0;
}
