#include "tools/bench/bench_config.h"

#include <cmath>
#include <limits>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"

namespace llmc::bench {

absl::StatusOr<double> ParseRequestRate(const std::string& text) {
  const std::string lowered = absl::AsciiStrToLower(absl::StripAsciiWhitespace(text));
  if (lowered == "inf" || lowered == "infinity") return std::numeric_limits<double>::infinity();
  double rate = 0;
  if (!absl::SimpleAtod(lowered, &rate) || !std::isfinite(rate) || rate <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("request_rate must be a positive number of requests per second or inf, got '", text, "'"));
  }
  return rate;
}

absl::StatusOr<GoodputObjectives> ParseGoodput(const std::vector<std::string>& items) {
  GoodputObjectives objectives;
  for (const std::string& raw : items) {
    const std::string item(absl::StripAsciiWhitespace(raw));
    if (item.empty()) continue;
    const std::vector<std::string> parts = absl::StrSplit(item, absl::MaxSplits(':', 1));
    double value = 0;
    if (parts.size() != 2 || !absl::SimpleAtod(parts[1], &value) || !std::isfinite(value) || value <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("goodput: expected NAME:MILLISECONDS with a positive number (e.g. ttft:500), got '", item, "'"));
    }
    const std::string name = absl::AsciiStrToLower(parts[0]);
    double* target = name == "ttft"   ? &objectives.ttft_ms
                     : name == "tpot" ? &objectives.tpot_ms
                     : name == "e2el" ? &objectives.e2el_ms
                                      : nullptr;
    if (target == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("goodput: unknown objective '", parts[0], "' (use ttft, tpot or e2el)"));
    }
    if (*target >= 0) return absl::InvalidArgumentError(absl::StrCat("goodput: '", name, "' given twice"));
    *target = value;
  }
  return objectives;
}

absl::Status BenchConfig::Validate() const {
  if (!absl::StartsWith(base_url, "http://")) {
    return absl::InvalidArgumentError(
        absl::StrCat("base_url must start with http:// (TLS is not supported), got '", base_url, "'"));
  }
  if (endpoint != "chat" && endpoint != "completions" && !absl::StartsWith(endpoint, "/")) {
    return absl::InvalidArgumentError(
        absl::StrCat("endpoint must be chat, completions or a path starting with /, got '", endpoint, "'"));
  }
  if (prompts_file.empty() && input_len < 1) return absl::InvalidArgumentError("input_len must be at least 1");
  if (output_len < 1) return absl::InvalidArgumentError("output_len must be at least 1");
  if (!(range_ratio >= 0 && range_ratio < 1)) {
    return absl::InvalidArgumentError(absl::StrCat("range_ratio must be in [0, 1), got ", range_ratio));
  }
  if (num_prompts < 1) return absl::InvalidArgumentError("num_prompts must be at least 1");
  if (turns < 1 || turns > 1000)
    return absl::InvalidArgumentError(absl::StrCat("turns must be in [1, 1000], got ", turns));
  if ((turns > 1 || shared_prefix_len > 0) && !prompts_file.empty()) {
    return absl::InvalidArgumentError("turns and shared_prefix_len need the random dataset, not a prompts_file");
  }
  RETURN_IF_ERROR(ParseRequestRate(request_rate).status());
  if (!(burstiness > 0) || !std::isfinite(burstiness)) {
    return absl::InvalidArgumentError(absl::StrCat("burstiness must be a positive number, got ", burstiness));
  }
  if (!(temperature >= 0) || !std::isfinite(temperature)) {
    return absl::InvalidArgumentError(absl::StrCat("temperature must be >= 0, got ", temperature));
  }
  if (timeout <= absl::ZeroDuration()) return absl::InvalidArgumentError("timeout must be positive");
  if (max_duration <= absl::ZeroDuration()) return absl::InvalidArgumentError("max_duration must be positive");
  return ParseGoodput(goodput).status();
}

std::vector<std::string> NormalizeFlagArgs(const std::vector<std::string>& args) {
  std::vector<std::string> out;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string arg = args[i];
    if (absl::StartsWith(arg, "--") && arg.size() > 2) {
      const size_t equals = arg.find('=');
      const size_t name_end = equals == std::string::npos ? arg.size() : equals;
      for (size_t c = 2; c < name_end; ++c) {
        if (arg[c] == '-') arg[c] = '_';
      }
      if (arg == "--goodput") {
        std::vector<std::string> values;
        while (i + 1 < args.size() && !absl::StartsWith(args[i + 1], "--")) values.push_back(args[++i]);
        out.push_back(absl::StrCat("--goodput=", absl::StrJoin(values, ",")));
        continue;
      }
    }
    out.push_back(std::move(arg));
  }
  return out;
}

}  // namespace llmc::bench
