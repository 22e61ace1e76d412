// jinja2's built-in filters over a sequence (the table is in filters.cc). Each gets the input iterated as
// FilterCall::items: a string's characters, a dict's keys, a list's items.
#include <algorithm>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "worker/jinja/builtins.h"
#include "worker/jinja/filter_call.h"
#include "worker/jinja/operators.h"
#include "worker/jinja/unicode_text.h"

namespace llmc::jinja {

absl::StatusOr<Value> ListFilter(FilterCall& call) { return Value::List(std::move(call.items)); }

absl::StatusOr<Value> FirstFilter(FilterCall& call) {
  if (call.items.empty()) return Value::Undefined("No first item, sequence was empty.");
  return call.items.front();
}

absl::StatusOr<Value> LastFilter(FilterCall& call) {
  if (call.items.empty()) return Value::Undefined("No last item, sequence was empty.");
  // Python's reversed() of a str indexes it, and Markup's indexing returns Markup.
  if (call.input.is_markup()) return Value::Markup(call.items.back().string_value());
  return call.items.back();
}

absl::StatusOr<Value> ReverseFilter(FilterCall& call) {
  if (call.input.is_string()) {
    std::vector<char32_t> characters = DecodeAll(call.input.string_value());
    std::reverse(characters.begin(), characters.end());
    return StringLike(call.input, EncodeAll(characters));
  }
  std::reverse(call.items.begin(), call.items.end());
  return Value::List(std::move(call.items));
}

absl::StatusOr<Value> JoinFilter(FilterCall& call) {
  const Value* separator = call.arguments.Get(0, "d");
  const Value* attribute = call.arguments.Get(1, "attribute");
  const std::string glue = separator == nullptr ? "" : TextOf(*separator);
  RenderBudget& budget = call.interpreter.budget();
  std::string out;
  for (size_t i = 0; i < call.items.size(); ++i) {
    ASSIGN_OR_RETURN(Value item, KeyOf(call.interpreter, call.items[i], attribute));
    if (i > 0) out += glue;
    out += TextOf(item);
    if (out.size() > budget.limits().max_output_bytes) RETURN_IF_ERROR(budget.Build(out.size()));
  }
  RETURN_IF_ERROR(budget.Build(out.size()));
  return Value::String(std::move(out));
}

absl::StatusOr<Value> MapFilter(FilterCall& call) {
  std::vector<Value> mapped;
  mapped.reserve(call.items.size());
  if (const Value* attribute = call.arguments.Keyword("attribute")) {
    const Value* fallback = call.arguments.Keyword("default");
    for (const Value& item : call.items) {
      ASSIGN_OR_RETURN(Value value, KeyOf(call.interpreter, item, attribute));
      mapped.push_back(value.is_undefined() && fallback != nullptr ? *fallback : value);
    }
    return Value::List(std::move(mapped));
  }
  if (call.arguments.positional.empty()) return Value::List(std::move(call.items));
  const std::string filter = TextOf(call.arguments.positional[0]);
  if (!IsKnownFilter(filter)) return absl::InvalidArgumentError(absl::StrCat("No filter named '", filter, "'."));
  const CallArguments rest = ShiftArguments(call.arguments, 1);
  for (const Value& item : call.items) {
    RETURN_IF_ERROR(call.interpreter.budget().Step());
    ASSIGN_OR_RETURN(Value value, call.interpreter.ApplyFilter(filter, item, rest));
    mapped.push_back(std::move(value));
  }
  return Value::List(std::move(mapped));
}

absl::StatusOr<Value> SelectFilter(FilterCall& call) {
  const bool by_attribute = call.name == "selectattr" || call.name == "rejectattr";
  const bool keep_passing = call.name == "select" || call.name == "selectattr";
  std::string attribute;
  size_t test_index = 0;
  if (by_attribute) {
    if (call.arguments.positional.empty()) return absl::InvalidArgumentError("Missing parameter for attribute name");
    attribute = TextOf(call.arguments.positional[0]);
    test_index = 1;
  }
  const bool has_test = call.arguments.positional.size() > test_index;
  const std::string test = has_test ? TextOf(call.arguments.positional[test_index]) : "";
  if (has_test && !IsKnownTest(test)) return absl::InvalidArgumentError(absl::StrCat("No test named '", test, "'."));
  const CallArguments rest = ShiftArguments(call.arguments, test_index + 1);
  std::vector<Value> selected;
  for (const Value& item : call.items) {
    RETURN_IF_ERROR(call.interpreter.budget().Step());
    Value subject = item;
    if (by_attribute) {
      ASSIGN_OR_RETURN(subject, AttributeOf(call.interpreter, item, attribute));
    }
    bool passed;
    if (has_test) {
      ASSIGN_OR_RETURN(passed, call.interpreter.ApplyTest(test, subject, rest));
    } else {
      passed = IsTruthy(subject);
    }
    if (passed == keep_passing) selected.push_back(item);
  }
  return Value::List(std::move(selected));
}

absl::StatusOr<Value> OrderFilter(FilterCall& call) {
  const std::string& name = call.name;
  const std::vector<Value>& items = call.items;
  const bool case_sensitive = FlagArgument(call.arguments, name == "sort" ? 1 : 0, "case_sensitive", false);
  const Value* attribute = call.arguments.Get(name == "sort" ? 2 : 1, "attribute");
  std::vector<Value> keys;
  keys.reserve(items.size());
  for (const Value& item : items) {
    ASSIGN_OR_RETURN(Value key, KeyOf(call.interpreter, item, attribute));
    keys.push_back(SortKey(key, case_sensitive));
  }
  if (name == "unique") {
    std::vector<Value> unique;
    std::vector<Value> seen;
    for (size_t i = 0; i < items.size(); ++i) {
      RETURN_IF_ERROR(call.interpreter.budget().Step());
      bool duplicate = false;
      for (const Value& key : seen) duplicate = duplicate || Equals(key, keys[i]);
      if (duplicate) continue;
      seen.push_back(keys[i]);
      unique.push_back(items[i]);
    }
    return Value::List(std::move(unique));
  }
  std::vector<size_t> order(items.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  absl::Status error;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    absl::StatusOr<int> compared = CompareOrder(keys[a], keys[b], "<");
    if (!compared.ok()) {
      error.Update(compared.status());
      return false;
    }
    return *compared == -1;
  });
  RETURN_IF_ERROR(error);
  if (name == "min" || name == "max") {
    if (items.empty()) return Value::Undefined("No aggregated item, sequence was empty.");
    if (name == "min") return items[order.front()];
    // Python's max keeps the first of equal maxima.
    size_t best = order.back();
    for (size_t index : order) {
      if (Equals(keys[index], keys[best])) {
        best = index;
        break;
      }
    }
    return items[best];
  }
  if (FlagArgument(call.arguments, 0, "reverse", false)) {
    // Python's sort(reverse=True) keeps equal items in their original order.
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      absl::StatusOr<int> compared = CompareOrder(keys[a], keys[b], "<");
      return compared.ok() && *compared == 1;
    });
  }
  std::vector<Value> sorted;
  sorted.reserve(order.size());
  for (size_t index : order) sorted.push_back(items[index]);
  return Value::List(std::move(sorted));
}

absl::StatusOr<Value> SumFilter(FilterCall& call) {
  const Value* attribute = call.arguments.Get(0, "attribute");
  const Value* start = call.arguments.Get(1, "start");
  Value total = start == nullptr ? Value::Int(0) : *start;
  for (const Value& item : call.items) {
    ASSIGN_OR_RETURN(Value value, KeyOf(call.interpreter, item, attribute));
    ASSIGN_OR_RETURN(total, BinaryOperation("+", total, value, call.interpreter.budget()));
  }
  return total;
}

absl::StatusOr<Value> BatchFilter(FilterCall& call) {
  ASSIGN_OR_RETURN(int64_t size, IntArgument(call.arguments, 0, "linecount", 1));
  if (size <= 0) return absl::InvalidArgumentError("batch size must be positive");
  const Value* fill = call.arguments.Get(1, "fill_with");
  std::vector<Value> batches;
  std::vector<Value> current;
  for (const Value& item : call.items) {
    current.push_back(item);
    if (static_cast<int64_t>(current.size()) == size) {
      batches.push_back(Value::List(std::move(current)));
      current.clear();
    }
  }
  if (!current.empty()) {
    if (fill != nullptr && !fill->is_none()) {
      while (static_cast<int64_t>(current.size()) < size) current.push_back(*fill);
    }
    batches.push_back(Value::List(std::move(current)));
  }
  return Value::List(std::move(batches));
}

}  // namespace llmc::jinja
