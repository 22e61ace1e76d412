#ifndef LLMC_WORKER_JINJA_INTERPRETER_H_
#define LLMC_WORKER_JINJA_INTERPRETER_H_

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "worker/jinja/ast.h"
#include "worker/jinja/render_budget.h"
#include "worker/jinja/value.h"

namespace llmc::jinja {

// Variables visible at one point of a render; lookups walk out to the enclosing scopes. A loop iteration,
// macro call and {% with %} each get a fresh scope, as in jinja2.
class Scope : public std::enable_shared_from_this<Scope> {
 public:
  explicit Scope(std::shared_ptr<Scope> parent) : parent_(std::move(parent)) {}

  const Value* Find(const std::string& name) const;
  void Set(const std::string& name, Value value) { variables_[name] = std::move(value); }

 private:
  absl::flat_hash_map<std::string, Value> variables_;
  std::shared_ptr<Scope> parent_;
};

struct CallArguments {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keywords;

  // The argument at `index`, or else the keyword `name`; null when neither was passed.
  const Value* Get(size_t index, absl::string_view name) const;
  const Value* Keyword(absl::string_view name) const;
};

// Status payload that marks an error raised by the template itself through raise_exception().
inline constexpr absl::string_view kRaisedByTemplatePayload = "llmc.jinja/raise_exception";

// Runs a parsed template. One Interpreter serves one render on one thread.
class Interpreter {
 public:
  Interpreter(const RenderLimits& limits, absl::Time now, absl::TimeZone time_zone);

  // Renders `body` with `globals` (the caller's variables) visible.
  absl::StatusOr<std::string> Render(const StmtList& body, std::shared_ptr<Scope> globals);

  // The hooks that filters, tests and methods use.
  RenderBudget& budget() { return budget_; }
  absl::StatusOr<Value> Call(const Value& callee, const CallArguments& arguments);
  absl::StatusOr<Value> ApplyFilter(const std::string& name, const Value& input, const CallArguments& arguments);
  absl::StatusOr<bool> ApplyTest(const std::string& name, const Value& input, const CallArguments& arguments);
  absl::StatusOr<Value> GetAttribute(const Value& object, const std::string& name);
  absl::StatusOr<Value> GetItem(const Value& object, const Value& key);

  // Sets up the built-in globals (range, dict, namespace, raise_exception, strftime_now) in `scope`.
  static void AddBuiltins(Scope* scope);

 private:
  enum class Flow { kNormal, kBreak, kContinue };

  absl::StatusOr<Flow> ExecBody(const StmtList& body, const std::shared_ptr<Scope>& scope);
  absl::StatusOr<Flow> Exec(const Stmt& stmt, const std::shared_ptr<Scope>& scope);
  absl::StatusOr<Flow> ExecFor(const Stmt& stmt, const std::shared_ptr<Scope>& scope);
  absl::Status ExecSet(const Stmt& stmt, const std::shared_ptr<Scope>& scope);
  absl::Status ExecCallBlock(const Stmt& stmt, const std::shared_ptr<Scope>& scope);
  absl::Status Assign(const Target& target, const Value& value, Scope* scope, int line);
  absl::StatusOr<std::string> Capture(const StmtList& body, const std::shared_ptr<Scope>& scope);
  absl::Status Emit(absl::string_view text);

  absl::StatusOr<Value> Eval(const Expr& expr, const std::shared_ptr<Scope>& scope);
  absl::StatusOr<Value> EvalInner(const Expr& expr, const std::shared_ptr<Scope>& scope);
  absl::StatusOr<CallArguments> EvalArguments(const Expr& expr, size_t first, const std::shared_ptr<Scope>& scope);
  absl::StatusOr<Value> EvalCompare(const Expr& expr, const std::shared_ptr<Scope>& scope);
  absl::StatusOr<Value> EvalSlice(const Expr& expr, const std::shared_ptr<Scope>& scope);
  absl::StatusOr<Value> EvalFilterChain(const Expr& expr, const std::shared_ptr<Scope>& scope, std::string input);
  absl::StatusOr<Value> CallMacro(const Callable& macro, const CallArguments& arguments);
  absl::StatusOr<Value> CallBuiltin(const Callable& function, const CallArguments& arguments);

  RenderBudget budget_;
  absl::Time now_;
  absl::TimeZone time_zone_;
  std::string* out_ = nullptr;              // where output goes now (a capture buffer inside macros and set blocks)
  std::vector<std::string> filter_inputs_;  // the bodies of the enclosing {% filter %} / block {% set %}
  std::vector<std::shared_ptr<Scope>> macro_scopes_;  // scopes that macros were defined in (see Callable)
};

// Errors carry the template line: "<message> (line N)"; raise_exception's message stays exact.
absl::Status AtLine(absl::Status status, int line);

}  // namespace llmc::jinja

#endif  // LLMC_WORKER_JINJA_INTERPRETER_H_
