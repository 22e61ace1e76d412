#ifndef LLMC_WORKER_JINJA_AST_H_
#define LLMC_WORKER_JINJA_AST_H_

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "worker/jinja/value.h"

namespace llmc::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Keyword {
  std::string name;
  ExprPtr value;
};

struct Expr {
  enum class Kind {
    kConstant,     // constant (None, bool, int, float, str)
    kName,         // name
    kFilterInput,  // the rendered body of {% filter %} or a block {% set %}
    kList,         // children
    kTuple,        // children
    kDict,         // children: key, value, key, value, ...
    kGetAttr,      // children[0].name
    kGetItem,      // children[0][children[1]]
    kSlice,        // children[0][children[1]:children[2]:children[3]], absent parts null
    kCall,         // children[0](children[1..], keywords)
    kFilter,       // children[0] | name(children[1..], keywords); children[0] null in a filter block
    kTest,         // children[0] is name(children[1..], keywords)
    kUnary,        // op children[0]: "-", "+" or "not"
    kBinary,       // children[0] op children[1]: + - * / // % ** ~ and or
    kCompare,      // children[0] ops[0] children[1] ops[1] children[2] ...
    kCondition,    // children[1] if children[0] else children[2] (null: undefined)
  };
  Kind kind;
  int line = 0;
  Value constant;
  std::string name;              // kName, kGetAttr, kFilter, kTest; the operator for kUnary/kBinary
  std::vector<std::string> ops;  // kCompare: "==", "!=", "<", "<=", ">", ">=", "in", "notin"
  std::vector<ExprPtr> children;
  std::vector<Keyword> keywords;
  bool negated = false;  // kTest: `is not`
};

struct Stmt;
using StmtList = std::vector<std::unique_ptr<Stmt>>;

// An assignment target: a name, a tuple of names (`for k, v in ...`), or a namespace attribute.
struct Target {
  std::vector<std::string> names;  // more than one, or `is_tuple`: unpack
  bool is_tuple = false;
  std::string namespace_attribute;  // non-empty: `names[0].namespace_attribute`
};

struct MacroParameter {
  std::string name;
  ExprPtr default_value;  // null: required
};

struct Stmt {
  enum class Kind {
    kText,         // text
    kOutput,       // {{ expr }}
    kIf,           // conditions[i] → bodies[i]; else_body
    kFor,          // for target in expr [if condition] body [else else_body]
    kSet,          // set target = expr
    kSetBlock,     // set target [| filter] body endset
    kMacro,        // macro name(parameters) body
    kCallBlock,    // call[(parameters)] expr body endcall
    kFilterBlock,  // filter expr body endfilter
    kWith,         // with targets = values body endwith
    kBreak,
    kContinue,
  };
  Kind kind;
  int line = 0;
  std::string text;
  ExprPtr expr;       // output, for iterable, set value, call expression, filter chain (block set filter)
  ExprPtr condition;  // for loop filter
  std::vector<ExprPtr> conditions;
  std::vector<StmtList> bodies;
  StmtList body;
  StmtList else_body;
  Target target;
  std::vector<Target> with_targets;
  std::vector<ExprPtr> with_values;
  std::string name;  // macro name
  std::vector<MacroParameter> parameters;
};

}  // namespace llmc::jinja

#endif  // LLMC_WORKER_JINJA_AST_H_
