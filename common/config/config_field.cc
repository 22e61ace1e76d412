#include "common/config/config_field.h"

#include <cmath>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace llmc::config {
namespace {

template <typename Int>
absl::Status ParseInteger(absl::string_view text, Int* out, absl::string_view what) {
  Int value;
  if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(text), &value)) {
    return absl::InvalidArgumentError(absl::StrCat("expected ", what, ", got '", text, "'"));
  }
  *out = value;
  return absl::OkStatus();
}

}  // namespace

absl::Status ParseConfigValue(absl::string_view text, bool* out) {
  const std::string lower = absl::AsciiStrToLower(absl::StripAsciiWhitespace(text));
  if (lower == "true" || lower == "1" || lower == "yes" || lower == "on") {
    *out = true;
  } else if (lower == "false" || lower == "0" || lower == "no" || lower == "off") {
    *out = false;
  } else {
    return absl::InvalidArgumentError(absl::StrCat("expected true or false, got '", text, "'"));
  }
  return absl::OkStatus();
}

absl::Status ParseConfigValue(absl::string_view text, int32_t* out) { return ParseInteger(text, out, "an integer"); }
absl::Status ParseConfigValue(absl::string_view text, int64_t* out) { return ParseInteger(text, out, "an integer"); }
absl::Status ParseConfigValue(absl::string_view text, uint32_t* out) {
  return ParseInteger(text, out, "a non-negative integer");
}
absl::Status ParseConfigValue(absl::string_view text, uint64_t* out) {
  return ParseInteger(text, out, "a non-negative integer");
}

absl::Status ParseConfigValue(absl::string_view text, double* out) {
  double value;
  if (!absl::SimpleAtod(absl::StripAsciiWhitespace(text), &value) || !std::isfinite(value)) {
    return absl::InvalidArgumentError(absl::StrCat("expected a number, got '", text, "'"));
  }
  *out = value;
  return absl::OkStatus();
}

absl::Status ParseConfigValue(absl::string_view text, std::string* out) {
  *out = std::string(text);
  return absl::OkStatus();
}

absl::Status ParseConfigValue(absl::string_view text, absl::Duration* out) {
  absl::Duration value;
  const absl::string_view trimmed = absl::StripAsciiWhitespace(text);
  if (!absl::ParseDuration(trimmed, &value) || value == absl::InfiniteDuration() ||
      value == -absl::InfiniteDuration()) {
    return absl::InvalidArgumentError(absl::StrCat("expected a duration such as 2s, 500ms or 1m30s, got '", text, "'"));
  }
  *out = value;
  return absl::OkStatus();
}

absl::Status ParseConfigValue(absl::string_view text, std::vector<std::string>* out) {
  std::vector<std::string> items;
  for (absl::string_view item : absl::StrSplit(text, ',', absl::SkipWhitespace())) {
    items.emplace_back(absl::StripAsciiWhitespace(item));
  }
  *out = std::move(items);
  return absl::OkStatus();
}

std::string FormatConfigValue(bool value) { return value ? "true" : "false"; }
std::string FormatConfigValue(int32_t value) { return absl::StrCat(value); }
std::string FormatConfigValue(int64_t value) { return absl::StrCat(value); }
std::string FormatConfigValue(uint32_t value) { return absl::StrCat(value); }
std::string FormatConfigValue(uint64_t value) { return absl::StrCat(value); }
std::string FormatConfigValue(double value) { return absl::StrCat(value); }
std::string FormatConfigValue(const std::string& value) { return value; }
std::string FormatConfigValue(absl::Duration value) { return absl::FormatDuration(value); }
std::string FormatConfigValue(const std::vector<std::string>& value) { return absl::StrJoin(value, ","); }

absl::string_view ConfigTypeName(const bool*) { return "bool"; }
absl::string_view ConfigTypeName(const int32_t*) { return "int"; }
absl::string_view ConfigTypeName(const int64_t*) { return "int"; }
absl::string_view ConfigTypeName(const uint32_t*) { return "uint"; }
absl::string_view ConfigTypeName(const uint64_t*) { return "uint"; }
absl::string_view ConfigTypeName(const double*) { return "number"; }
absl::string_view ConfigTypeName(const std::string*) { return "string"; }
absl::string_view ConfigTypeName(const absl::Duration*) { return "duration"; }
absl::string_view ConfigTypeName(const std::vector<std::string>*) { return "list"; }

}  // namespace llmc::config
