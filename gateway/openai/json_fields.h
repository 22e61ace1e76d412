#ifndef LLMC_GATEWAY_OPENAI_JSON_FIELDS_H_
#define LLMC_GATEWAY_OPENAI_JSON_FIELDS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace llmc::gateway {

// Compact JSON; invalid UTF-8 inside strings becomes U+FFFD instead of making dump() throw.
std::string DumpJson(const nlohmann::json& value);
std::string DumpJson(const nlohmann::ordered_json& value);

// Reads the optional fields of one JSON object of a request, naming the parameter in every error
// (`prefix` + field name, e.g. "messages[2].content"). A missing field and JSON null both read as absent.
class FieldReader {
 public:
  FieldReader(const nlohmann::json& object, std::string prefix = "");

  // The field's value, or nullptr when it is missing or null.
  const nlohmann::json* Find(std::string_view name) const;
  std::string Param(std::string_view name) const;

  absl::StatusOr<std::optional<bool>> Bool(std::string_view name) const;
  absl::StatusOr<std::optional<std::string>> String(std::string_view name) const;
  // Integers in [min, max]. Integral floats such as 16.0 are accepted (as Python clients may send them);
  // anything beyond the range, however large, is an error rather than an overflow.
  absl::StatusOr<std::optional<int64_t>> Int(std::string_view name, int64_t min, int64_t max) const;
  // Finite numbers in [min, max].
  absl::StatusOr<std::optional<double>> Number(std::string_view name, double min, double max) const;

  // "must be a <what>, not a <type of value>" for this field.
  absl::Status WrongType(std::string_view name, const nlohmann::json& value, std::string_view what) const;

 private:
  const nlohmann::json& object_;
  std::string prefix_;
};

// "a string", "an array", ... for error messages.
std::string DescribeJsonType(const nlohmann::json& value);

// Copying or printing JSON recurses once per level, and the order-keeping parse inserts keys with a linear
// search: a text nested thousands deep, or an object with a million keys, would crash or stall the gateway.
// INVALID_ARGUMENT naming `param` when `text` (`what` in the message, e.g. "the request body") nests deeper
// than limits::kMaxJsonDepth or has an object with more than limits::kMaxJsonObjectKeys keys.
absl::Status CheckJsonShape(std::string_view text, std::string_view param, std::string_view what);

// CheckJsonShape, after refusing a text that holds a NUL byte (common/json_shape.h: the parser would stop
// there and read only what comes before it), for a text that must be JSON.
absl::Status CheckJsonText(std::string_view text, std::string_view param, std::string_view what);

// Why nlohmann's parser refused a text, for an error message: its "[json.exception...] " prefix dropped, and
// cut short, since it quotes what was last read (which can be most of a huge unterminated string).
std::string JsonParseErrorDetail(const nlohmann::json::exception& error);

// The request body parsed a second time, keeping the client's key order (nlohmann::json sorts object keys),
// on first use only. The text must have passed ParseRequestBody, and must outlive this.
class OrderedBody {
 public:
  explicit OrderedBody(std::string_view text) : text_(text) {}

  const nlohmann::ordered_json& Get();

 private:
  std::string_view text_;
  std::optional<nlohmann::ordered_json> parsed_;
};

}  // namespace llmc::gateway

#endif  // LLMC_GATEWAY_OPENAI_JSON_FIELDS_H_
