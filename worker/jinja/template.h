#ifndef LLMC_WORKER_JINJA_TEMPLATE_H_
#define LLMC_WORKER_JINJA_TEMPLATE_H_

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"
#include "worker/jinja/ast.h"
#include "worker/jinja/render_budget.h"

namespace llmc::jinja {

struct ParseOptions {
  // Hugging Face's chat-template environment sets both.
  bool trim_blocks = true;    // drop the first newline after a block tag
  bool lstrip_blocks = true;  // strip spaces and tabs before a block tag at the start of a line
  bool keep_trailing_newline = false;
};

struct RenderOptions {
  // What strftime_now() formats; nullopt: the current time. Tests fix it.
  std::optional<absl::Time> now;
  absl::TimeZone time_zone = absl::LocalTimeZone();
  RenderLimits limits;
};

// A Jinja template as Hugging Face chat templates use it: jinja2's ImmutableSandboxedEnvironment with
// trim_blocks, lstrip_blocks and the loop controls, transformers' tojson filter, and the globals
// raise_exception(), strftime_now(), namespace(), range() and dict().
//
// Parse once when a model loads; Render is const and safe to call from many threads at once.
class Template {
 public:
  // INVALID_ARGUMENT for syntax errors and for constructs the interpreter does not support, naming the
  // construct and its line ("unsupported tag 'include' at line 3").
  static absl::StatusOr<std::unique_ptr<Template>> Parse(std::string_view source, const ParseOptions& options);

  // Renders with the members of `context` (a JSON object: messages, tools, add_generation_prompt,
  // bos_token, ..., and any extra keyword arguments) as variables. Errors:
  //  - raise_exception(message) in the template: INVALID_ARGUMENT whose message is exactly `message`, and
  //    IsRaisedByTemplate() is true;
  //  - other template errors (undefined attribute of an undefined value, type errors, ...):
  //    INVALID_ARGUMENT, message ending in "(line N)";
  //  - a limit in options.limits reached: RESOURCE_EXHAUSTED.
  //
  // Python keeps the key order of JSON objects, and `tojson` and dict iteration show it, so parse
  // requests into nlohmann::ordered_json to render what transformers renders. The nlohmann::json
  // overload is for callers whose objects are already sorted by key.
  absl::StatusOr<std::string> Render(const nlohmann::ordered_json& context, const RenderOptions& options) const;
  absl::StatusOr<std::string> Render(const nlohmann::json& context, const RenderOptions& options) const;

 private:
  explicit Template(StmtList body) : body_(std::move(body)) {}
  template <typename Json>
  absl::StatusOr<std::string> RenderJson(const Json& context, const RenderOptions& options) const;

  StmtList body_;
};

// Whether `status` came from the template calling raise_exception().
bool IsRaisedByTemplate(const absl::Status& status);

}  // namespace llmc::jinja

#endif  // LLMC_WORKER_JINJA_TEMPLATE_H_
