#ifndef LLMC_WORKER_JINJA_METHODS_H_
#define LLMC_WORKER_JINJA_METHODS_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "worker/jinja/interpreter.h"
#include "worker/jinja/value.h"

namespace llmc::jinja {

// Python methods of str, dict and list that templates call (`text.strip()`, `message.get('x')`).
bool HasMethod(const Value& self, absl::string_view name);
// Methods that exist in Python but that jinja2's immutable sandbox refuses (list.append, dict.update, ...).
bool IsUnsafeMethod(const Value& self, absl::string_view name);
absl::StatusOr<Value> CallMethod(Interpreter& interpreter, const Value& self, const std::string& name,
                                 const CallArguments& arguments);

}  // namespace llmc::jinja

#endif  // LLMC_WORKER_JINJA_METHODS_H_
