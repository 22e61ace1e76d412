#include "worker/jinja/interpreter.h"

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "worker/jinja/callable.h"
#include "worker/jinja/operators.h"

namespace llmc::jinja {
namespace {

constexpr absl::string_view kLinePayload = "llmc.jinja/line";

// Depth of values (lists in lists) a template may build; deeper values are refused so that printing,
// comparing and freeing them cannot exhaust the stack.
constexpr int kMaxValueDepth = 200;

class NestingGuard {
 public:
  explicit NestingGuard(RenderBudget& budget) : budget_(budget) {}
  ~NestingGuard() { budget_.Leave(); }
  NestingGuard(const NestingGuard&) = delete;
  NestingGuard& operator=(const NestingGuard&) = delete;

 private:
  RenderBudget& budget_;
};

absl::Status CheckDepth(const Value& value) {
  if (value.depth() > kMaxValueDepth) return absl::ResourceExhaustedError("template built a value nested too deeply");
  return absl::OkStatus();
}

}  // namespace

const Value* Scope::Find(const std::string& name) const {
  for (const Scope* scope = this; scope != nullptr; scope = scope->parent_.get()) {
    auto it = scope->variables_.find(name);
    if (it != scope->variables_.end()) return &it->second;
  }
  return nullptr;
}

const Value* CallArguments::Get(size_t index, absl::string_view name) const {
  if (index < positional.size()) return &positional[index];
  return Keyword(name);
}

const Value* CallArguments::Keyword(absl::string_view name) const {
  for (const auto& [key, value] : keywords) {
    if (key == name) return &value;
  }
  return nullptr;
}

absl::Status AtLine(absl::Status status, int line) {
  if (status.ok() || status.GetPayload(kRaisedByTemplatePayload).has_value() ||
      status.GetPayload(kLinePayload).has_value()) {
    return status;
  }
  absl::Status located(status.code(), absl::StrCat(status.message(), " (line ", line, ")"));
  located.SetPayload(kLinePayload, absl::Cord(absl::StrCat(line)));
  return located;
}

Interpreter::Interpreter(const RenderLimits& limits, absl::Time now, absl::TimeZone time_zone)
    : budget_(limits), now_(now), time_zone_(time_zone) {}

absl::StatusOr<std::string> Interpreter::Render(const StmtList& body, std::shared_ptr<Scope> globals) {
  std::string output;
  out_ = &output;
  absl::StatusOr<Flow> flow = ExecBody(body, globals);
  out_ = nullptr;
  macro_scopes_.clear();
  if (!flow.ok()) return flow.status();
  return output;
}

absl::Status Interpreter::Emit(absl::string_view text) {
  if (out_->size() + text.size() > budget_.limits().max_output_bytes) {
    return absl::ResourceExhaustedError("rendered template exceeds the output size limit");
  }
  out_->append(text.data(), text.size());
  return absl::OkStatus();
}

absl::StatusOr<std::string> Interpreter::Capture(const StmtList& body, const std::shared_ptr<Scope>& scope) {
  std::string buffer;
  std::string* saved = out_;
  out_ = &buffer;
  absl::StatusOr<Flow> flow = ExecBody(body, scope);
  out_ = saved;
  if (!flow.ok()) return flow.status();
  return buffer;
}

absl::StatusOr<Interpreter::Flow> Interpreter::ExecBody(const StmtList& body, const std::shared_ptr<Scope>& scope) {
  for (const auto& stmt : body) {
    ASSIGN_OR_RETURN(Flow flow, Exec(*stmt, scope));
    if (flow != Flow::kNormal) return flow;
  }
  return Flow::kNormal;
}

absl::StatusOr<Interpreter::Flow> Interpreter::Exec(const Stmt& stmt, const std::shared_ptr<Scope>& scope) {
  RETURN_IF_ERROR(AtLine(budget_.Step(), stmt.line));
  RETURN_IF_ERROR(AtLine(budget_.Enter(), stmt.line));
  NestingGuard guard(budget_);
  switch (stmt.kind) {
    case Stmt::Kind::kText:
      RETURN_IF_ERROR(AtLine(Emit(stmt.text), stmt.line));
      return Flow::kNormal;
    case Stmt::Kind::kOutput: {
      ASSIGN_OR_RETURN(Value value, Eval(*stmt.expr, scope));
      RETURN_IF_ERROR(AtLine(Emit(ToPythonString(value)), stmt.line));
      return Flow::kNormal;
    }
    case Stmt::Kind::kIf:
      for (size_t i = 0; i < stmt.conditions.size(); ++i) {
        ASSIGN_OR_RETURN(Value condition, Eval(*stmt.conditions[i], scope));
        if (IsTruthy(condition)) return ExecBody(stmt.bodies[i], scope);
      }
      return ExecBody(stmt.else_body, scope);
    case Stmt::Kind::kFor:
      return ExecFor(stmt, scope);
    case Stmt::Kind::kSet:
    case Stmt::Kind::kSetBlock:
      RETURN_IF_ERROR(ExecSet(stmt, scope));
      return Flow::kNormal;
    case Stmt::Kind::kMacro: {
      auto macro = std::make_shared<Callable>();
      macro->type = Callable::Type::kMacro;
      macro->name = stmt.name;
      macro->macro = &stmt;
      macro->closure = scope.get();
      macro_scopes_.push_back(scope);
      scope->Set(stmt.name, Value::Function(std::move(macro)));
      return Flow::kNormal;
    }
    case Stmt::Kind::kCallBlock:
      RETURN_IF_ERROR(ExecCallBlock(stmt, scope));
      return Flow::kNormal;
    case Stmt::Kind::kFilterBlock: {
      ASSIGN_OR_RETURN(std::string body, Capture(stmt.body, scope));
      ASSIGN_OR_RETURN(Value filtered, EvalFilterChain(*stmt.expr, scope, std::move(body)));
      RETURN_IF_ERROR(AtLine(Emit(ToPythonString(filtered)), stmt.line));
      return Flow::kNormal;
    }
    case Stmt::Kind::kWith: {
      auto inner = std::make_shared<Scope>(scope);
      for (size_t i = 0; i < stmt.with_targets.size(); ++i) {
        ASSIGN_OR_RETURN(Value value, Eval(*stmt.with_values[i], scope));
        RETURN_IF_ERROR(Assign(stmt.with_targets[i], value, inner.get(), stmt.line));
      }
      return ExecBody(stmt.body, inner);
    }
    case Stmt::Kind::kBreak:
      return Flow::kBreak;
    case Stmt::Kind::kContinue:
      return Flow::kContinue;
  }
  return Flow::kNormal;
}

absl::StatusOr<Interpreter::Flow> Interpreter::ExecFor(const Stmt& stmt, const std::shared_ptr<Scope>& scope) {
  ASSIGN_OR_RETURN(Value iterable, Eval(*stmt.expr, scope));
  absl::StatusOr<std::vector<Value>> all_items = IterateValue(iterable);
  if (!all_items.ok()) return AtLine(all_items.status(), stmt.line);
  std::vector<Value> items;
  if (stmt.condition == nullptr) {
    items = *std::move(all_items);
  } else {
    // jinja2 filters first, so loop.length and loop.last count only the items that pass.
    for (Value& item : *all_items) {
      RETURN_IF_ERROR(AtLine(budget_.Iteration(), stmt.line));
      auto filter_scope = std::make_shared<Scope>(scope);
      RETURN_IF_ERROR(Assign(stmt.target, item, filter_scope.get(), stmt.line));
      ASSIGN_OR_RETURN(Value keep, Eval(*stmt.condition, filter_scope));
      if (IsTruthy(keep)) items.push_back(std::move(item));
    }
  }
  // As compiled by jinja2, the else block runs unless some iteration reached the end of the body: a loop
  // left by break, or whose every iteration ended in continue, runs it too.
  bool body_completed = false;
  const int64_t length = static_cast<int64_t>(items.size());
  for (int64_t i = 0; i < length; ++i) {
    RETURN_IF_ERROR(AtLine(budget_.Iteration(), stmt.line));
    auto iteration_scope = std::make_shared<Scope>(scope);
    RETURN_IF_ERROR(Assign(stmt.target, items[static_cast<size_t>(i)], iteration_scope.get(), stmt.line));
    DictData loop;
    loop.entries.reserve(12);
    auto add = [&loop](const char* key, Value value) {
      loop.entries.emplace_back(Value::String(key), std::move(value));
    };
    add("index", Value::Int(i + 1));
    add("index0", Value::Int(i));
    add("revindex", Value::Int(length - i));
    add("revindex0", Value::Int(length - i - 1));
    add("first", Value::Bool(i == 0));
    add("last", Value::Bool(i == length - 1));
    add("length", Value::Int(length));
    add("depth", Value::Int(1));
    add("depth0", Value::Int(0));
    if (i > 0) add("previtem", items[static_cast<size_t>(i - 1)]);
    if (i + 1 < length) add("nextitem", items[static_cast<size_t>(i + 1)]);
    auto cycle = std::make_shared<Callable>();
    cycle->name = "loop.cycle";
    cycle->self = Value::Int(i);
    add("cycle", Value::Function(std::move(cycle)));
    iteration_scope->Set("loop", Value::Dict(std::move(loop)));
    ASSIGN_OR_RETURN(Flow flow, ExecBody(stmt.body, iteration_scope));
    if (flow == Flow::kBreak) break;
    body_completed = body_completed || flow == Flow::kNormal;
  }
  if (!body_completed) return ExecBody(stmt.else_body, scope);
  return Flow::kNormal;
}

absl::Status Interpreter::Assign(const Target& target, const Value& value, Scope* scope, int line) {
  if (!target.namespace_attribute.empty()) {
    const Value* object = scope->Find(target.names[0]);
    if (object == nullptr || !object->is_namespace()) {
      return AtLine(absl::InvalidArgumentError("cannot assign attribute on non-namespace object"), line);
    }
    if (value.holds_namespace()) {
      return AtLine(absl::InvalidArgumentError("a namespace attribute cannot hold a namespace"), line);
    }
    RETURN_IF_ERROR(AtLine(CheckDepth(value), line));
    object->namespace_data().Set(target.namespace_attribute, value);
    return absl::OkStatus();
  }
  if (!target.is_tuple && target.names.size() == 1) {
    scope->Set(target.names[0], value);
    return absl::OkStatus();
  }
  absl::StatusOr<std::vector<Value>> items = IterateValue(value);
  if (!items.ok()) return AtLine(items.status(), line);
  if (items->size() != target.names.size()) {
    return AtLine(
        absl::InvalidArgumentError(items->size() > target.names.size()
                                       ? absl::StrCat("too many values to unpack (expected ", target.names.size(), ")")
                                       : absl::StrCat("not enough values to unpack (expected ", target.names.size(),
                                                      ", got ", items->size(), ")")),
        line);
  }
  for (size_t i = 0; i < items->size(); ++i) scope->Set(target.names[i], (*items)[i]);
  return absl::OkStatus();
}

absl::Status Interpreter::ExecSet(const Stmt& stmt, const std::shared_ptr<Scope>& scope) {
  Value value;
  if (stmt.kind == Stmt::Kind::kSet) {
    ASSIGN_OR_RETURN(value, Eval(*stmt.expr, scope));
  } else {
    ASSIGN_OR_RETURN(std::string body, Capture(stmt.body, scope));
    if (stmt.expr != nullptr) {
      ASSIGN_OR_RETURN(value, EvalFilterChain(*stmt.expr, scope, std::move(body)));
    } else {
      value = Value::String(std::move(body));
    }
  }
  return Assign(stmt.target, value, scope.get(), stmt.line);
}

absl::Status Interpreter::ExecCallBlock(const Stmt& stmt, const std::shared_ptr<Scope>& scope) {
  const Expr& call = *stmt.expr;
  ASSIGN_OR_RETURN(Value callee, Eval(*call.children[0], scope));
  ASSIGN_OR_RETURN(CallArguments arguments, EvalArguments(call, 1, scope));
  auto caller = std::make_shared<Callable>();
  caller->type = Callable::Type::kMacro;
  caller->name = "caller";
  caller->macro = &stmt;
  caller->closure = scope.get();
  macro_scopes_.push_back(scope);
  arguments.keywords.emplace_back("caller", Value::Function(std::move(caller)));
  absl::StatusOr<Value> result = Call(callee, arguments);
  if (!result.ok()) return AtLine(result.status(), stmt.line);
  return AtLine(Emit(ToPythonString(*result)), stmt.line);
}

absl::StatusOr<Value> Interpreter::Call(const Value& callee, const CallArguments& arguments) {
  if (callee.is_undefined()) return UndefinedError(callee);
  if (!callee.is_callable()) {
    return absl::InvalidArgumentError(absl::StrCat("'", TypeName(callee), "' object is not callable"));
  }
  const Callable& callable = callee.callable();
  if (callable.type == Callable::Type::kMacro) return CallMacro(callable, arguments);
  return CallBuiltin(callable, arguments);
}

absl::StatusOr<Value> Interpreter::CallMacro(const Callable& macro, const CallArguments& arguments) {
  RETURN_IF_ERROR(budget_.Enter());
  NestingGuard guard(budget_);
  const Stmt& stmt = *macro.macro;
  auto scope = std::make_shared<Scope>(macro.closure->shared_from_this());
  const size_t parameter_count = stmt.parameters.size();
  std::vector<bool> bound(parameter_count, false);
  for (size_t i = 0; i < arguments.positional.size() && i < parameter_count; ++i) {
    scope->Set(stmt.parameters[i].name, arguments.positional[i]);
    bound[i] = true;
  }
  DictData extra_keywords;
  for (const auto& [name, value] : arguments.keywords) {
    bool matched = false;
    for (size_t i = 0; i < parameter_count; ++i) {
      if (stmt.parameters[i].name != name) continue;
      if (bound[i])
        return absl::InvalidArgumentError(
            absl::StrCat("macro '", macro.name, "' got multiple values for argument '", name, "'"));
      scope->Set(name, value);
      bound[i] = true;
      matched = true;
    }
    if (matched) continue;
    if (name == "caller") {
      scope->Set("caller", value);
    } else {
      extra_keywords.entries.emplace_back(Value::String(name), value);
    }
  }
  for (size_t i = 0; i < parameter_count; ++i) {
    if (bound[i]) continue;
    const MacroParameter& parameter = stmt.parameters[i];
    if (parameter.default_value != nullptr) {
      ASSIGN_OR_RETURN(Value value, Eval(*parameter.default_value, scope));
      scope->Set(parameter.name, value);
    } else {
      scope->Set(parameter.name, Value::Undefined(absl::StrCat("parameter '", parameter.name, "' was not provided")));
    }
  }
  std::vector<Value> extra_positional;
  for (size_t i = parameter_count; i < arguments.positional.size(); ++i)
    extra_positional.push_back(arguments.positional[i]);
  scope->Set("varargs", Value::Tuple(std::move(extra_positional)));
  scope->Set("kwargs", Value::Dict(std::move(extra_keywords)));
  ASSIGN_OR_RETURN(std::string output, Capture(stmt.body, scope));
  return Value::String(std::move(output));
}

absl::StatusOr<CallArguments> Interpreter::EvalArguments(const Expr& expr, size_t first,
                                                         const std::shared_ptr<Scope>& scope) {
  CallArguments arguments;
  for (size_t i = first; i < expr.children.size(); ++i) {
    ASSIGN_OR_RETURN(Value value, Eval(*expr.children[i], scope));
    arguments.positional.push_back(std::move(value));
  }
  for (const Keyword& keyword : expr.keywords) {
    ASSIGN_OR_RETURN(Value value, Eval(*keyword.value, scope));
    arguments.keywords.emplace_back(keyword.name, std::move(value));
  }
  return arguments;
}

absl::StatusOr<Value> Interpreter::EvalFilterChain(const Expr& expr, const std::shared_ptr<Scope>& scope,
                                                   std::string input) {
  filter_inputs_.push_back(std::move(input));
  absl::StatusOr<Value> result = Eval(expr, scope);
  filter_inputs_.pop_back();
  return result;
}

absl::StatusOr<Value> Interpreter::Eval(const Expr& expr, const std::shared_ptr<Scope>& scope) {
  absl::Status status = budget_.Step();
  if (status.ok()) status = budget_.Enter();
  if (!status.ok()) return AtLine(status, expr.line);
  NestingGuard guard(budget_);
  absl::StatusOr<Value> result = EvalInner(expr, scope);
  if (!result.ok()) return AtLine(result.status(), expr.line);
  return result;
}

absl::StatusOr<Value> Interpreter::EvalInner(const Expr& expr, const std::shared_ptr<Scope>& scope) {
  switch (expr.kind) {
    case Expr::Kind::kConstant:
      return expr.constant;
    case Expr::Kind::kName: {
      const Value* value = scope->Find(expr.name);
      if (value == nullptr) return Value::Undefined(absl::StrCat("'", expr.name, "' is undefined"));
      return *value;
    }
    case Expr::Kind::kFilterInput:
      if (filter_inputs_.empty()) return absl::InternalError("filter input outside a filter block");
      return Value::String(filter_inputs_.back());
    case Expr::Kind::kList:
    case Expr::Kind::kTuple: {
      std::vector<Value> items;
      items.reserve(expr.children.size());
      for (const auto& child : expr.children) {
        ASSIGN_OR_RETURN(Value item, Eval(*child, scope));
        items.push_back(std::move(item));
      }
      Value value = expr.kind == Expr::Kind::kList ? Value::List(std::move(items)) : Value::Tuple(std::move(items));
      RETURN_IF_ERROR(CheckDepth(value));
      return value;
    }
    case Expr::Kind::kDict: {
      DictData dict;
      for (size_t i = 0; i + 1 < expr.children.size(); i += 2) {
        ASSIGN_OR_RETURN(Value key, Eval(*expr.children[i], scope));
        ASSIGN_OR_RETURN(Value value, Eval(*expr.children[i + 1], scope));
        if (key.is_list() && !key.list().is_tuple) return absl::InvalidArgumentError("unhashable type: 'list'");
        if (key.is_dict()) return absl::InvalidArgumentError("unhashable type: 'dict'");
        dict.Set(std::move(key), std::move(value));
      }
      Value value = Value::Dict(std::move(dict));
      RETURN_IF_ERROR(CheckDepth(value));
      return value;
    }
    case Expr::Kind::kGetAttr: {
      ASSIGN_OR_RETURN(Value object, Eval(*expr.children[0], scope));
      return GetAttribute(object, expr.name);
    }
    case Expr::Kind::kGetItem: {
      ASSIGN_OR_RETURN(Value object, Eval(*expr.children[0], scope));
      ASSIGN_OR_RETURN(Value key, Eval(*expr.children[1], scope));
      return GetItem(object, key);
    }
    case Expr::Kind::kSlice:
      return EvalSlice(expr, scope);
    case Expr::Kind::kCall: {
      ASSIGN_OR_RETURN(Value callee, Eval(*expr.children[0], scope));
      ASSIGN_OR_RETURN(CallArguments arguments, EvalArguments(expr, 1, scope));
      return Call(callee, arguments);
    }
    case Expr::Kind::kFilter: {
      ASSIGN_OR_RETURN(Value input, Eval(*expr.children[0], scope));
      ASSIGN_OR_RETURN(CallArguments arguments, EvalArguments(expr, 1, scope));
      return ApplyFilter(expr.name, input, arguments);
    }
    case Expr::Kind::kTest: {
      ASSIGN_OR_RETURN(Value input, Eval(*expr.children[0], scope));
      ASSIGN_OR_RETURN(CallArguments arguments, EvalArguments(expr, 1, scope));
      ASSIGN_OR_RETURN(bool passed, ApplyTest(expr.name, input, arguments));
      return Value::Bool(passed != expr.negated);
    }
    case Expr::Kind::kUnary: {
      ASSIGN_OR_RETURN(Value operand, Eval(*expr.children[0], scope));
      if (expr.name == "not") return Value::Bool(!IsTruthy(operand));
      return UnaryMinus(operand, expr.name == "-");
    }
    case Expr::Kind::kBinary: {
      ASSIGN_OR_RETURN(Value left, Eval(*expr.children[0], scope));
      if (expr.name == "and") return IsTruthy(left) ? Eval(*expr.children[1], scope) : left;
      if (expr.name == "or") return IsTruthy(left) ? left : Eval(*expr.children[1], scope);
      ASSIGN_OR_RETURN(Value right, Eval(*expr.children[1], scope));
      return BinaryOperation(expr.name, left, right, budget_);
    }
    case Expr::Kind::kCompare:
      return EvalCompare(expr, scope);
    case Expr::Kind::kCondition: {
      ASSIGN_OR_RETURN(Value condition, Eval(*expr.children[0], scope));
      if (IsTruthy(condition)) return Eval(*expr.children[1], scope);
      if (expr.children[2] != nullptr) return Eval(*expr.children[2], scope);
      return Value::Undefined(absl::StrCat("the inline if-expression on line ", expr.line,
                                           " evaluated to false and no else section was defined."));
    }
  }
  return absl::InternalError("unknown expression");
}

absl::StatusOr<Value> Interpreter::EvalCompare(const Expr& expr, const std::shared_ptr<Scope>& scope) {
  ASSIGN_OR_RETURN(Value left, Eval(*expr.children[0], scope));
  for (size_t i = 0; i < expr.ops.size(); ++i) {
    ASSIGN_OR_RETURN(Value right, Eval(*expr.children[i + 1], scope));
    const std::string& op = expr.ops[i];
    bool result;
    if (op == "==") {
      result = Equals(left, right);
    } else if (op == "!=") {
      result = !Equals(left, right);
    } else if (op == "in" || op == "notin") {
      ASSIGN_OR_RETURN(bool contained, Contains(right, left));
      result = contained == (op == "in");
    } else {
      ASSIGN_OR_RETURN(int order, CompareOrder(left, right, op));
      if (op == "<") {
        result = order == -1;
      } else if (op == "<=") {
        result = order == -1 || order == 0;
      } else if (op == ">") {
        result = order == 1;
      } else {
        result = order == 1 || order == 0;
      }
    }
    if (!result) return Value::Bool(false);
    left = std::move(right);
  }
  return Value::Bool(true);
}

}  // namespace llmc::jinja
