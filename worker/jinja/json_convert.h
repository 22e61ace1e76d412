#ifndef LLMC_WORKER_JINJA_JSON_CONVERT_H_
#define LLMC_WORKER_JINJA_JSON_CONVERT_H_

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "worker/jinja/value.h"

namespace llmc::jinja {

// JSON objects become dicts, arrays lists; INVALID_ARGUMENT for nesting deeper than `max_depth` or
// strings that are not UTF-8. Dicts keep the key order of the JSON value: the document's order for an
// ordered_json, sorted for a plain json (which has already lost the document's order).
absl::StatusOr<Value> ValueFromJson(const nlohmann::ordered_json& json, int max_depth);
absl::StatusOr<Value> ValueFromJson(const nlohmann::json& json, int max_depth);

// The arguments of Python's json.dumps that transformers' `tojson` filter passes through.
struct JsonDumpOptions {
  bool ensure_ascii = false;
  std::optional<std::string> indent;  // nullopt: everything on one line
  std::string item_separator = ", ";
  std::string key_separator = ": ";
  bool sort_keys = false;
};

// json.dumps(value): INVALID_ARGUMENT for what Python cannot serialize (undefined, namespaces, callables).
absl::Status AppendJson(const Value& value, const JsonDumpOptions& options, std::string* out);

}  // namespace llmc::jinja

#endif  // LLMC_WORKER_JINJA_JSON_CONVERT_H_
