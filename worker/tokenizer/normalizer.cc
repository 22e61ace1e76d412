#include "worker/tokenizer/normalizer.h"

#include <utf8proc.h>

#include <cstdlib>

#include "absl/strings/str_cat.h"
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
      result.forms_.insert(result.forms_.end(), inner->forms_.begin(), inner->forms_.end());
    }
  } else if (type == "NFC") {
    result.forms_.push_back(Form::kNfc);
  } else if (type == "NFD") {
    result.forms_.push_back(Form::kNfd);
  } else if (type == "NFKC") {
    result.forms_.push_back(Form::kNfkc);
  } else if (type == "NFKD") {
    result.forms_.push_back(Form::kNfkd);
  } else {
    return absl::UnimplementedError(absl::StrCat("unsupported tokenizer normalizer '", type, "'"));
  }
  return result;
}

std::string Normalizer::Apply(absl::string_view text) const {
  // ASCII is unchanged by every normal form: the common case costs one scan.
  if (forms_.empty() || IsAscii(text)) return std::string(text);
  std::string current(text);
  for (Form form : forms_) {
    int options = UTF8PROC_STABLE;
    switch (form) {
      case Form::kNfc:
        options |= UTF8PROC_COMPOSE;
        break;
      case Form::kNfd:
        options |= UTF8PROC_DECOMPOSE;
        break;
      case Form::kNfkc:
        options |= UTF8PROC_COMPOSE | UTF8PROC_COMPAT;
        break;
      case Form::kNfkd:
        options |= UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT;
        break;
    }
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
