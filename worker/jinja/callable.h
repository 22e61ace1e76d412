#ifndef LLMC_WORKER_JINJA_CALLABLE_H_
#define LLMC_WORKER_JINJA_CALLABLE_H_

#include <string>

#include "worker/jinja/value.h"

namespace llmc::jinja {

struct Stmt;
class Scope;

// What a callable value calls: a built-in global (range, namespace, raise_exception, ...), a method bound
// to its object (`text.split`), or a macro with the scope it was defined in.
struct Callable {
  enum class Type { kBuiltin, kBoundMethod, kMacro };
  Type type = Type::kBuiltin;
  std::string name;
  Value self;                   // kBoundMethod: the object
  const Stmt* macro = nullptr;  // kMacro: the {% macro %} or {% call %} statement
  // kMacro: the scope it sees. Not owned: a scope holds its own macros, so the interpreter keeps the
  // scopes that macros were defined in alive for the whole render instead, leaving no reference cycle.
  Scope* closure = nullptr;
};

}  // namespace llmc::jinja

#endif  // LLMC_WORKER_JINJA_CALLABLE_H_
