#include "gateway/openai/json_fields.h"

#include <cmath>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/json_shape.h"
#include "gateway/openai/openai_error.h"

namespace llmc::gateway {

std::string DumpJson(const nlohmann::json& value) {
  return value.dump(-1, ' ', /*ensure_ascii=*/false, nlohmann::json::error_handler_t::replace);
}

std::string DumpJson(const nlohmann::ordered_json& value) {
  return value.dump(-1, ' ', /*ensure_ascii=*/false, nlohmann::ordered_json::error_handler_t::replace);
}

std::string DescribeJsonType(const nlohmann::json& value) {
  switch (value.type()) {
    case nlohmann::json::value_t::null:
      return "null";
    case nlohmann::json::value_t::object:
      return "an object";
    case nlohmann::json::value_t::array:
      return "an array";
    case nlohmann::json::value_t::string:
      return "a string";
    case nlohmann::json::value_t::boolean:
      return "a boolean";
    default:
      return "a number";
  }
}

absl::Status CheckJsonShape(std::string_view text, std::string_view param, std::string_view what) {
  const absl::Status status = CheckJsonShapeLimits(text, what);
  if (status.ok()) return status;
  return InvalidParameter(param, std::string_view(status.message().data(), status.message().size()));
}

absl::Status CheckJsonText(std::string_view text, std::string_view param, std::string_view what) {
  const absl::Status status = CheckNoNulByte(text, what);
  if (!status.ok()) return InvalidParameter(param, std::string_view(status.message().data(), status.message().size()));
  return CheckJsonShape(text, param, what);
}

std::string JsonParseErrorDetail(const nlohmann::json::exception& error) {
  constexpr size_t kMaxDetail = 300;
  std::string_view detail = error.what();
  if (const size_t end = detail.find("] "); !detail.empty() && detail[0] == '[' && end != std::string_view::npos) {
    detail.remove_prefix(end + 2);
  }
  std::string out(detail.substr(0, kMaxDetail));
  if (detail.size() > kMaxDetail) out += "...";
  return out;
}

const nlohmann::ordered_json& OrderedBody::Get() {
  if (!parsed_.has_value()) parsed_ = nlohmann::ordered_json::parse(text_.begin(), text_.end());
  return *parsed_;
}

FieldReader::FieldReader(const nlohmann::json& object, std::string prefix)
    : object_(object), prefix_(std::move(prefix)) {}

const nlohmann::json* FieldReader::Find(std::string_view name) const {
  const auto it = object_.find(name);
  if (it == object_.end() || it->is_null()) return nullptr;
  return &*it;
}

std::string FieldReader::Param(std::string_view name) const { return absl::StrCat(prefix_, std::string(name)); }

absl::Status FieldReader::WrongType(std::string_view name, const nlohmann::json& value, std::string_view what) const {
  const std::string param = Param(name);
  return InvalidParameter(param,
                          absl::StrCat("'", param, "' must be ", std::string(what), ", not ", DescribeJsonType(value)));
}

absl::StatusOr<std::optional<bool>> FieldReader::Bool(std::string_view name) const {
  const nlohmann::json* value = Find(name);
  if (value == nullptr) return std::nullopt;
  if (!value->is_boolean()) return WrongType(name, *value, "a boolean");
  return value->get<bool>();
}

absl::StatusOr<std::optional<std::string>> FieldReader::String(std::string_view name) const {
  const nlohmann::json* value = Find(name);
  if (value == nullptr) return std::nullopt;
  if (!value->is_string()) return WrongType(name, *value, "a string");
  return value->get<std::string>();
}

absl::StatusOr<std::optional<int64_t>> FieldReader::Int(std::string_view name, int64_t min, int64_t max) const {
  const nlohmann::json* value = Find(name);
  if (value == nullptr) return std::nullopt;
  const std::string param = Param(name);
  const auto out_of_range = [&] {
    return InvalidParameter(
        param, absl::StrCat("'", param, "' must be between ", min, " and ", max, ", got ", DumpJson(*value)));
  };
  if (value->is_number_unsigned()) {
    const uint64_t number = value->get<uint64_t>();
    if (max < 0 || number > static_cast<uint64_t>(max)) return out_of_range();
    if (static_cast<int64_t>(number) < min) return out_of_range();
    return static_cast<int64_t>(number);
  }
  if (value->is_number_integer()) {
    const int64_t number = value->get<int64_t>();
    if (number < min || number > max) return out_of_range();
    return number;
  }
  if (value->is_number_float()) {
    const double number = value->get<double>();
    if (!std::isfinite(number) || number != std::trunc(number)) return WrongType(name, *value, "an integer");
    // max + 1.0 rather than max: (double)INT64_MAX rounds up to 2^63, which does not fit.
    if (number < static_cast<double>(min) || number >= static_cast<double>(max) + 1.0) return out_of_range();
    return static_cast<int64_t>(number);
  }
  return WrongType(name, *value, "an integer");
}

absl::StatusOr<std::optional<double>> FieldReader::Number(std::string_view name, double min, double max) const {
  const nlohmann::json* value = Find(name);
  if (value == nullptr) return std::nullopt;
  if (!value->is_number()) return WrongType(name, *value, "a number");
  const double number = value->get<double>();
  if (!(number >= min && number <= max)) {  // NaN fails too
    const std::string param = Param(name);
    return InvalidParameter(
        param, absl::StrCat("'", param, "' must be between ", min, " and ", max, ", got ", DumpJson(*value)));
  }
  return number;
}

}  // namespace llmc::gateway
