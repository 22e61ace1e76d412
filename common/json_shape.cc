#include "common/json_shape.h"

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/request_limits.h"

namespace llmc {

absl::Status CheckJsonShapeLimits(std::string_view text, std::string_view what, size_t max_depth) {
  std::vector<uint32_t> keys_per_level;  // one entry per open array or object; keys counted for objects
  std::vector<bool> is_object;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    switch (c) {
      case '"':
        in_string = true;
        break;
      case '{':
      case '[':
        if (keys_per_level.size() == max_depth) {
          return absl::InvalidArgumentError(
              absl::StrCat(std::string(what), " nests JSON deeper than ", max_depth, " levels"));
        }
        keys_per_level.push_back(0);
        is_object.push_back(c == '{');
        break;
      case '}':
      case ']':
        if (!keys_per_level.empty()) {
          keys_per_level.pop_back();
          is_object.pop_back();
        }
        break;
      case ':':
        if (!is_object.empty() && is_object.back() && ++keys_per_level.back() > limits::kMaxJsonObjectKeys) {
          return absl::InvalidArgumentError(absl::StrCat(std::string(what), " has a JSON object with more than ",
                                                         limits::kMaxJsonObjectKeys, " keys"));
        }
        break;
      default:
        break;
    }
  }
  return absl::OkStatus();
}

std::optional<size_t> FindNulByte(std::string_view text) {
  const size_t at = text.find('\0');
  if (at == std::string_view::npos) return std::nullopt;
  return at;
}

absl::Status CheckNoNulByte(std::string_view text, std::string_view what) {
  const std::optional<size_t> at = FindNulByte(text);
  if (!at.has_value()) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(std::string(what), " is not valid JSON: it holds a NUL byte at offset ", *at));
}

}  // namespace llmc
