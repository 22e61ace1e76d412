// Fuzzes the Jinja chat-template interpreter. The input is a template, then optionally a NUL byte and a
// JSON render context (when it does not parse, a small chat context is used). Parsing and rendering must
// end with OK or an error status, within the render limits, never a crash, hang or stack overflow; and
// rendering the same template twice must give the same result (renders share no state).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/civil_time.h"
#include "nlohmann/json.hpp"
#include "worker/jinja/template.h"

namespace {

[[noreturn]] void Fail(const std::string& what) {
  std::cerr << what << "\n";
  std::abort();
}

nlohmann::ordered_json DefaultContext() {
  return nlohmann::ordered_json::parse(R"({
    "messages": [{"role": "system", "content": "sys"}, {"role": "user", "content": "hi 日本 🎉"},
                 {"role": "assistant", "content": "<think>r</think>a", "tool_calls": [
                   {"type": "function", "function": {"name": "f", "arguments": {"x": 1}}}]},
                 {"role": "tool", "content": "out"}],
    "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}],
    "add_generation_prompt": true, "bos_token": "<s>", "eos_token": "</s>", "enable_thinking": false})");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t split = input.find('\0');
  const absl::string_view source = input.substr(0, split);
  nlohmann::ordered_json context = DefaultContext();
  if (split != absl::string_view::npos) {
    const absl::string_view json_text = input.substr(split + 1);
    auto parsed =
        nlohmann::ordered_json::parse(json_text.begin(), json_text.end(), nullptr, /*allow_exceptions=*/false);
    if (parsed.is_object()) context = std::move(parsed);
  }

  auto compiled = llmc::jinja::Template::Parse(std::string(source), llmc::jinja::ParseOptions());
  if (!compiled.ok()) return 0;

  llmc::jinja::RenderOptions options;
  options.now = absl::FromCivil(absl::CivilSecond(2025, 1, 2, 3, 4, 5), absl::UTCTimeZone());
  options.time_zone = absl::UTCTimeZone();
  // Tight limits keep each input fast; the defaults are what a server uses.
  options.limits.max_output_bytes = 1 << 20;
  options.limits.max_loop_iterations = 20000;
  options.limits.max_steps = 200000;
  options.limits.max_built_bytes = 16 << 20;
  const absl::StatusOr<std::string> first = (*compiled)->Render(context, options);
  const absl::StatusOr<std::string> second = (*compiled)->Render(context, options);
  if (first.ok() != second.ok() || (first.ok() && *first != *second) ||
      (!first.ok() && first.status() != second.status())) {
    Fail("rendering the same template twice gave different results");
  }
  if (first.ok() && first->size() > options.limits.max_output_bytes) Fail("output exceeds the output limit");
  return 0;
}
