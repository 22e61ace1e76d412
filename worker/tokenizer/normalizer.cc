#include "worker/tokenizer/normalizer.h"

#include <utf8proc.h>

#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "nlohmann/json.hpp"

namespace llmc::tokenizer {
namespace {

bool IsAscii(absl::string_view text) {
  for (unsigned char c : text) {
    if (c >= 0x80) return false;
  }
  return true;
}

}  // namespace

absl::StatusOr<Normalizer> Normalizer::FromJson(const nlohmann::json& normalizer) {
  Normalizer result;
  if (normalizer.is_null()) return result;
  const std::string type = normalizer.value("type", "");
  if (type == "Sequence") {
    for (const auto& part : normalizer.value("normalizers", nlohmann::json::array())) {
      auto inner = FromJson(part);
      if (!inner.ok()) return inner.status();
      result.steps_.insert(result.steps_.end(), inner->steps_.begin(), inner->steps_.end());
    }
  } else if (type == "NFC") {
    result.steps_.push_back({Kind::kNfc, "", ""});
  } else if (type == "NFD") {
    result.steps_.push_back({Kind::kNfd, "", ""});
  } else if (type == "NFKC") {
    result.steps_.push_back({Kind::kNfkc, "", ""});
  } else if (type == "NFKD") {
    result.steps_.push_back({Kind::kNfkd, "", ""});
  } else if (type == "Prepend") {
    result.steps_.push_back({Kind::kPrepend, normalizer.value("prepend", ""), ""});
  } else if (type == "Replace") {
    const nlohmann::json pattern = normalizer.value("pattern", nlohmann::json::object());
    if (!pattern.contains("String") || !pattern["String"].is_string()) {
      return absl::UnimplementedError("unsupported tokenizer normalizer: Replace with a regex pattern");
    }
    const std::string from = pattern["String"].get<std::string>();
    if (from.empty()) return absl::InvalidArgumentError("Replace normalizer with an empty pattern");
    result.steps_.push_back({Kind::kReplace, from, normalizer.value("content", "")});
  } else {
    return absl::UnimplementedError(absl::StrCat("unsupported tokenizer normalizer '", type, "'"));
  }
  return result;
}

std::string Normalizer::Apply(absl::string_view text) const {
  std::string current(text);
  for (const Step& step : steps_) {
    int options = UTF8PROC_STABLE;
    switch (step.kind) {
      case Kind::kPrepend:
        if (!current.empty()) current.insert(0, step.pattern);
        continue;
      case Kind::kReplace:
        current = absl::StrReplaceAll(current, {{step.pattern, step.content}});
        continue;
      case Kind::kNfc:
        options |= UTF8PROC_COMPOSE;
        break;
      case Kind::kNfd:
        options |= UTF8PROC_DECOMPOSE;
        break;
      case Kind::kNfkc:
        options |= UTF8PROC_COMPOSE | UTF8PROC_COMPAT;
        break;
      case Kind::kNfkd:
        options |= UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT;
        break;
    }
    if (IsAscii(current)) continue;  // ASCII is unchanged by every normal form
    utf8proc_uint8_t* output = nullptr;
    const utf8proc_ssize_t length = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(current.data()),
                                                 current.size(), &output, static_cast<utf8proc_option_t>(options));
    // utf8proc fails only on invalid UTF-8, which callers have already refused; keep the text as it is.
    if (length >= 0) current.assign(reinterpret_cast<const char*>(output), length);
    std::free(output);
  }
  return current;
}

}  // namespace llmc::tokenizer
