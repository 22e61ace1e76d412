#include "worker/jinja/json_convert.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "worker/jinja/unicode_text.h"

namespace llmc::jinja {
namespace {

template <typename Json>
absl::StatusOr<Value> Convert(const Json& json, int depth_left) {
  if (depth_left < 0) return absl::InvalidArgumentError("template context is nested too deeply");
  switch (json.type()) {
    case Json::value_t::null:
    case Json::value_t::discarded:
      return Value::None();
    case Json::value_t::boolean:
      return Value::Bool(json.template get<bool>());
    case Json::value_t::number_integer:
      return Value::Int(json.template get<int64_t>());
    case Json::value_t::number_unsigned: {
      const uint64_t value = json.template get<uint64_t>();
      if (value > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        return Value::Float(static_cast<double>(value));
      }
      return Value::Int(static_cast<int64_t>(value));
    }
    case Json::value_t::number_float:
      return Value::Float(json.template get<double>());
    case Json::value_t::string: {
      const std::string& text = json.template get_ref<const std::string&>();
      if (!IsValidUtf8(text)) return absl::InvalidArgumentError("template context holds a string that is not UTF-8");
      return Value::String(text);
    }
    case Json::value_t::array: {
      std::vector<Value> items;
      items.reserve(json.size());
      for (const auto& element : json) {
        absl::StatusOr<Value> item = Convert(element, depth_left - 1);
        if (!item.ok()) return item.status();
        items.push_back(*std::move(item));
      }
      return Value::List(std::move(items));
    }
    case Json::value_t::object: {
      DictData dict;
      dict.entries.reserve(json.size());
      for (auto it = json.begin(); it != json.end(); ++it) {
        if (!IsValidUtf8(it.key())) return absl::InvalidArgumentError("template context holds a key that is not UTF-8");
        absl::StatusOr<Value> item = Convert(it.value(), depth_left - 1);
        if (!item.ok()) return item.status();
        dict.entries.emplace_back(Value::String(it.key()), *std::move(item));
      }
      return Value::Dict(std::move(dict));
    }
    case Json::value_t::binary:
      return absl::InvalidArgumentError("template context holds binary data");
  }
  return Value::None();
}

void AppendJsonString(absl::string_view text, bool ensure_ascii, std::string* out) {
  out->push_back('"');
  size_t position = 0;
  while (position < text.size()) {
    const char32_t c = DecodeCodePoint(text, &position);
    char escape[16];
    switch (c) {
      case '"':
        out->append("\\\"");
        break;
      case '\\':
        out->append("\\\\");
        break;
      case '\n':
        out->append("\\n");
        break;
      case '\r':
        out->append("\\r");
        break;
      case '\t':
        out->append("\\t");
        break;
      case '\b':
        out->append("\\b");
        break;
      case '\f':
        out->append("\\f");
        break;
      default:
        if (c < 0x20 || (ensure_ascii && c >= 0x7F && c < 0x10000)) {
          std::snprintf(escape, sizeof(escape), "\\u%04x", static_cast<unsigned>(c));
          out->append(escape);
        } else if (ensure_ascii && c >= 0x10000) {
          const char32_t v = c - 0x10000;
          std::snprintf(escape, sizeof(escape), "\\u%04x\\u%04x", static_cast<unsigned>(0xD800 + (v >> 10)),
                        static_cast<unsigned>(0xDC00 + (v & 0x3FF)));
          out->append(escape);
        } else {
          AppendCodePoint(c, out);
        }
    }
  }
  out->push_back('"');
}

std::string JsonFloat(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "Infinity" : "-Infinity";
  return FormatFloat(value);
}

absl::StatusOr<std::string> JsonKey(const Value& key) {
  switch (key.kind()) {
    case Value::Kind::kString:
      return key.string_value();
    case Value::Kind::kInt:
      return absl::StrCat(key.int_value());
    case Value::Kind::kFloat:
      return JsonFloat(key.float_value());
    case Value::Kind::kBool:
      return std::string(key.bool_value() ? "true" : "false");
    case Value::Kind::kNone:
      return std::string("null");
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("keys must be str, int, float, bool or None, not ", TypeName(key)));
  }
}

class JsonWriter {
 public:
  JsonWriter(const JsonDumpOptions& options, std::string* out) : options_(options), out_(out) {}

  absl::Status Write(const Value& value, int level) {
    switch (value.kind()) {
      case Value::Kind::kNone:
        out_->append("null");
        return absl::OkStatus();
      case Value::Kind::kBool:
        out_->append(value.bool_value() ? "true" : "false");
        return absl::OkStatus();
      case Value::Kind::kInt:
        absl::StrAppend(out_, value.int_value());
        return absl::OkStatus();
      case Value::Kind::kFloat:
        out_->append(JsonFloat(value.float_value()));
        return absl::OkStatus();
      case Value::Kind::kString:
        AppendJsonString(value.string_value(), options_.ensure_ascii, out_);
        return absl::OkStatus();
      case Value::Kind::kList:
        return WriteList(value.list(), level);
      case Value::Kind::kDict:
        return WriteDict(value.dict(), level);
      default:
        return absl::InvalidArgumentError(
            absl::StrCat("Object of type ", TypeName(value), " is not JSON serializable"));
    }
  }

 private:
  void NewLine(int level) {
    if (!options_.indent.has_value()) return;
    out_->push_back('\n');
    for (int i = 0; i < level; ++i) out_->append(*options_.indent);
  }

  absl::Status WriteList(const ListData& list, int level) {
    if (list.items.empty()) {
      out_->append("[]");
      return absl::OkStatus();
    }
    out_->push_back('[');
    for (size_t i = 0; i < list.items.size(); ++i) {
      if (i > 0) out_->append(options_.item_separator);
      NewLine(level + 1);
      if (absl::Status status = Write(list.items[i], level + 1); !status.ok()) return status;
    }
    NewLine(level);
    out_->push_back(']');
    return absl::OkStatus();
  }

  absl::Status WriteDict(const DictData& dict, int level) {
    if (dict.entries.empty()) {
      out_->append("{}");
      return absl::OkStatus();
    }
    std::vector<const std::pair<Value, Value>*> entries;
    for (const auto& entry : dict.entries) entries.push_back(&entry);
    if (options_.sort_keys) {
      for (const auto* entry : entries) {
        if (!entry->first.is_string()) return absl::InvalidArgumentError("sort_keys needs string keys");
      }
      std::stable_sort(entries.begin(), entries.end(),
                       [](const auto* a, const auto* b) { return a->first.string_value() < b->first.string_value(); });
    }
    out_->push_back('{');
    bool first = true;
    for (const auto* entry : entries) {
      if (!first) out_->append(options_.item_separator);
      first = false;
      NewLine(level + 1);
      absl::StatusOr<std::string> key = JsonKey(entry->first);
      if (!key.ok()) return key.status();
      AppendJsonString(*key, options_.ensure_ascii, out_);
      out_->append(options_.key_separator);
      if (absl::Status status = Write(entry->second, level + 1); !status.ok()) return status;
    }
    NewLine(level);
    out_->push_back('}');
    return absl::OkStatus();
  }

  const JsonDumpOptions& options_;
  std::string* out_;
};

}  // namespace

absl::StatusOr<Value> ValueFromJson(const nlohmann::ordered_json& json, int max_depth) {
  return Convert(json, max_depth);
}
absl::StatusOr<Value> ValueFromJson(const nlohmann::json& json, int max_depth) { return Convert(json, max_depth); }

absl::Status AppendJson(const Value& value, const JsonDumpOptions& options, std::string* out) {
  return JsonWriter(options, out).Write(value, 0);
}

}  // namespace llmc::jinja
