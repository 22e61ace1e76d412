#ifndef LLMC_WORKER_JINJA_FILTER_CALL_H_
#define LLMC_WORKER_JINJA_FILTER_CALL_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "worker/jinja/interpreter.h"
#include "worker/jinja/value.h"

// What the built-in filters share (filters.cc: the table and the filters over one value;
// sequence_filters.cc: those over a sequence). Internal to worker/jinja.
namespace llmc::jinja {

// One application of a filter: `input | name(arguments)`.
struct FilterCall {
  Interpreter& interpreter;
  const std::string& name;  // as called: one function may serve several names (escape, e, forceescape)
  const Value& input;
  const CallArguments& arguments;
  std::vector<Value> items;  // the input iterated, for the filters over sequences
};

using FilterFunction = absl::StatusOr<Value> (*)(FilterCall& call);

// jinja2's soft_str: what a filter that works on text sees.
std::string TextOf(const Value& value);
bool FlagArgument(const CallArguments& arguments, size_t index, absl::string_view name, bool fallback);
absl::StatusOr<int64_t> IntArgument(const CallArguments& arguments, size_t index, absl::string_view name,
                                    int64_t fallback);
// jinja2's make_attrgetter: "a.b.0" looks up each part as an item (numbers as indexes); no attribute (or
// none) is the item itself.
absl::StatusOr<Value> KeyOf(Interpreter& interpreter, const Value& item, const Value* attribute);
absl::StatusOr<Value> AttributeOf(Interpreter& interpreter, const Value& item, const std::string& path);
// The key that sort, unique, min and max compare: strings lowercased unless case-sensitive.
Value SortKey(const Value& value, bool case_sensitive);
// Arguments of a filter or test applied inside map/select: those after the name.
CallArguments ShiftArguments(const CallArguments& arguments, size_t count);

// The filters over a sequence (sequence_filters.cc); `call.items` holds the input iterated.
absl::StatusOr<Value> ListFilter(FilterCall& call);
absl::StatusOr<Value> FirstFilter(FilterCall& call);
absl::StatusOr<Value> LastFilter(FilterCall& call);
absl::StatusOr<Value> ReverseFilter(FilterCall& call);
absl::StatusOr<Value> JoinFilter(FilterCall& call);
absl::StatusOr<Value> MapFilter(FilterCall& call);
absl::StatusOr<Value> SelectFilter(FilterCall& call);  // select, reject, selectattr, rejectattr
absl::StatusOr<Value> OrderFilter(FilterCall& call);   // unique, sort, min, max
absl::StatusOr<Value> SumFilter(FilterCall& call);
absl::StatusOr<Value> BatchFilter(FilterCall& call);

}  // namespace llmc::jinja

#endif  // LLMC_WORKER_JINJA_FILTER_CALL_H_
