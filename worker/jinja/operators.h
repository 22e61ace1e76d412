#ifndef LLMC_WORKER_JINJA_OPERATORS_H_
#define LLMC_WORKER_JINJA_OPERATORS_H_

#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "worker/jinja/render_budget.h"
#include "worker/jinja/value.h"

namespace llmc::jinja {

// Python's semantics for + - * / // % ** and jinja2's ~ (string concatenation). Errors are
// INVALID_ARGUMENT with Python's wording; integers that leave int64 are an error rather than a bigint.
absl::StatusOr<Value> BinaryOperation(absl::string_view op, const Value& left, const Value& right,
                                      RenderBudget& budget);
absl::StatusOr<Value> UnaryMinus(const Value& operand, bool negate);

// Python's ordering (-1, 0, 1) for numbers, strings, and lists/tuples of those.
absl::StatusOr<int> CompareOrder(const Value& left, const Value& right, absl::string_view op);
// Python's `item in container`.
absl::StatusOr<bool> Contains(const Value& container, const Value& item);

// The items a for loop or filter sees when iterating `value`: list items, dict keys, the characters of a
// string, nothing for undefined; INVALID_ARGUMENT for what Python cannot iterate.
absl::StatusOr<std::vector<Value>> IterateValue(const Value& value);

// The error for using an undefined value where Python would call a method on jinja2's Undefined.
absl::Status UndefinedError(const Value& value);

}  // namespace llmc::jinja

#endif  // LLMC_WORKER_JINJA_OPERATORS_H_
