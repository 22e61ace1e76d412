#include "worker/jinja/template.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "worker/jinja/interpreter.h"
#include "worker/jinja/json_convert.h"
#include "worker/jinja/lexer.h"
#include "worker/jinja/parser.h"

namespace llmc::jinja {
namespace {

// JSON nesting accepted in the render context: what the worker accepts (common/request_limits.h: a tool
// call's arguments, 64 deep in their string, sit five levels down the message list), and a little more.
constexpr int kMaxContextDepth = 72;

}  // namespace

absl::StatusOr<std::unique_ptr<Template>> Template::Parse(std::string_view source, const ParseOptions& options) {
  LexerOptions lexer_options;
  lexer_options.trim_blocks = options.trim_blocks;
  lexer_options.lstrip_blocks = options.lstrip_blocks;
  lexer_options.keep_trailing_newline = options.keep_trailing_newline;
  ASSIGN_OR_RETURN(std::vector<Token> tokens, Tokenize(absl::string_view(source.data(), source.size()), lexer_options));
  ASSIGN_OR_RETURN(StmtList body, ParseTokens(tokens));
  return std::unique_ptr<Template>(new Template(std::move(body)));
}

absl::StatusOr<std::string> Template::Render(const nlohmann::ordered_json& context,
                                             const RenderOptions& options) const {
  return RenderJson(context, options);
}

absl::StatusOr<std::string> Template::Render(const nlohmann::json& context, const RenderOptions& options) const {
  return RenderJson(context, options);
}

template <typename Json>
absl::StatusOr<std::string> Template::RenderJson(const Json& context, const RenderOptions& options) const {
  if (!context.is_object() && !context.is_null()) {
    return absl::InvalidArgumentError("template context must be a JSON object");
  }
  auto builtins = std::make_shared<Scope>(nullptr);
  Interpreter::AddBuiltins(builtins.get());
  auto globals = std::make_shared<Scope>(builtins);
  if (context.is_object()) {
    for (auto it = context.begin(); it != context.end(); ++it) {
      absl::StatusOr<Value> value = ValueFromJson(it.value(), kMaxContextDepth);
      if (!value.ok()) return absl::InvalidArgumentError(absl::StrCat(it.key(), ": ", value.status().message()));
      globals->Set(it.key(), *std::move(value));
    }
  }
  Interpreter interpreter(options.limits, options.now.value_or(absl::Now()), options.time_zone);
  return interpreter.Render(body_, std::move(globals));
}

bool IsRaisedByTemplate(const absl::Status& status) { return status.GetPayload(kRaisedByTemplatePayload).has_value(); }

}  // namespace llmc::jinja
