// Tokenizer::FromJson: reads the parts of tokenizer.json and refuses, by name, what is not supported.
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "nlohmann/json.hpp"
#include "worker/tokenizer/byte_level.h"
#include "worker/tokenizer/tokenizer.h"

namespace llmc::tokenizer {
namespace {

using nlohmann::json;

// GPT-2's pre-tokenizer regex, used by ByteLevel pre-tokenizers with use_regex = true.
constexpr absl::string_view kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

struct PreTokenizerPlan {
  std::string pattern;  // empty: no splitting
  bool add_prefix_space = false;
};

absl::Status AddPreTokenizer(const json& node, bool first, PreTokenizerPlan& plan) {
  const std::string type = node.value("type", "");
  if (type == "Sequence") {
    bool is_first = first;
    for (const auto& part : node.value("pretokenizers", json::array())) {
      RETURN_IF_ERROR(AddPreTokenizer(part, is_first, plan));
      is_first = false;
    }
    return absl::OkStatus();
  }
  if (type == "Split") {
    if (node.value("invert", false)) return absl::UnimplementedError("unsupported pre-tokenizer: inverted Split");
    const std::string behavior = node.value("behavior", "");
    if (behavior != "Isolated") {
      return absl::UnimplementedError(absl::StrCat("unsupported Split pre-tokenizer behavior '", behavior, "'"));
    }
    const json& pattern = node.value("pattern", json::object());
    std::string regex;
    if (pattern.contains("Regex")) {
      regex = pattern["Regex"].get<std::string>();
    } else if (pattern.contains("String")) {
      regex = absl::StrCat("\\Q", pattern["String"].get<std::string>(), "\\E");
    } else {
      return absl::InvalidArgumentError("Split pre-tokenizer without a pattern");
    }
    if (!plan.pattern.empty()) return absl::UnimplementedError("unsupported pre-tokenizer: two split patterns");
    plan.pattern = regex;
    return absl::OkStatus();
  }
  if (type == "ByteLevel") {
    if (node.value("add_prefix_space", false)) {
      if (!first) return absl::UnimplementedError("unsupported pre-tokenizer: add_prefix_space after a split");
      plan.add_prefix_space = true;
    }
    if (node.value("use_regex", true)) {
      if (!plan.pattern.empty()) return absl::UnimplementedError("unsupported pre-tokenizer: two split patterns");
      plan.pattern = std::string(kGpt2Pattern);
    }
    return absl::OkStatus();
  }
  return absl::UnimplementedError(absl::StrCat("unsupported tokenizer pre-tokenizer '", type, "'"));
}

absl::Status CheckDecoder(const json& node) {
  if (node.is_null()) return absl::OkStatus();
  const std::string type = node.value("type", "");
  if (type == "ByteLevel") return absl::OkStatus();
  if (type == "Sequence") {
    for (const auto& part : node.value("decoders", json::array())) RETURN_IF_ERROR(CheckDecoder(part));
    return absl::OkStatus();
  }
  return absl::UnimplementedError(absl::StrCat("unsupported tokenizer decoder '", type, "'"));
}

// Collects the ids a TemplateProcessing post-processor puts before and after the single sequence.
absl::Status ReadPostProcessor(const json& node, std::vector<int32_t>& prefix, std::vector<int32_t>& suffix) {
  if (node.is_null()) return absl::OkStatus();
  const std::string type = node.value("type", "");
  if (type == "ByteLevel") return absl::OkStatus();  // offsets only
  if (type == "Sequence") {
    for (const auto& part : node.value("processors", json::array())) {
      RETURN_IF_ERROR(ReadPostProcessor(part, prefix, suffix));
    }
    return absl::OkStatus();
  }
  if (type != "TemplateProcessing") {
    return absl::UnimplementedError(absl::StrCat("unsupported tokenizer post-processor '", type, "'"));
  }
  const json& special_tokens = node.value("special_tokens", json::object());
  bool after_sequence = false;
  for (const auto& piece : node.value("single", json::array())) {
    if (piece.contains("Sequence")) {
      after_sequence = true;
    } else if (piece.contains("SpecialToken")) {
      const std::string name = piece["SpecialToken"].value("id", "");
      if (!special_tokens.contains(name)) {
        return absl::InvalidArgumentError(absl::StrCat("post-processor names unknown special token '", name, "'"));
      }
      for (const auto& id : special_tokens[name].value("ids", json::array())) {
        (after_sequence ? suffix : prefix).push_back(id.get<int32_t>());
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::FromFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read tokenizer file '", path, "'"));
  std::stringstream buffer;
  buffer << in.rdbuf();
  auto tokenizer = FromJson(buffer.str());
  if (!tokenizer.ok()) return Annotate(tokenizer.status(), path);
  return tokenizer;
}

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::FromJson(absl::string_view json_text) {
  json root;
  try {
    root = json::parse(json_text.begin(), json_text.end());
  } catch (const json::exception& error) {
    return absl::InvalidArgumentError(absl::StrCat("tokenizer.json is not valid JSON: ", error.what()));
  }
  auto tokenizer = std::unique_ptr<Tokenizer>(new Tokenizer());
  try {
    ASSIGN_OR_RETURN(tokenizer->model_, BpeModel::FromJson(root.value("model", json::object())));
    ASSIGN_OR_RETURN(tokenizer->normalizer_, Normalizer::FromJson(root.value("normalizer", json())));
    PreTokenizerPlan plan;
    const json pre_tokenizer = root.value("pre_tokenizer", json());
    if (!pre_tokenizer.is_null()) RETURN_IF_ERROR(AddPreTokenizer(pre_tokenizer, true, plan));
    if (!plan.pattern.empty()) {
      ASSIGN_OR_RETURN(tokenizer->split_, SplitPattern::Compile(plan.pattern));
    }
    tokenizer->add_prefix_space_ = plan.add_prefix_space;
    RETURN_IF_ERROR(CheckDecoder(root.value("decoder", json())));
    RETURN_IF_ERROR(ReadPostProcessor(root.value("post_processor", json()), tokenizer->template_prefix_,
                                      tokenizer->template_suffix_));

    std::vector<AddedToken> raw, normalized;
    for (const auto& entry : root.value("added_tokens", json::array())) {
      AddedToken token;
      token.id = entry.at("id").get<int32_t>();
      token.content = entry.at("content").get<std::string>();
      token.special = entry.value("special", false);
      token.single_word = entry.value("single_word", false);
      token.lstrip = entry.value("lstrip", false);
      token.rstrip = entry.value("rstrip", false);
      token.normalized = entry.value("normalized", false);
      tokenizer->added_tokens_.push_back(token);
      (token.normalized ? normalized : raw).push_back(token);
    }
    tokenizer->raw_added_ = std::make_unique<AddedTokenMatcher>(std::move(raw));
    tokenizer->normalized_added_ = std::make_unique<AddedTokenMatcher>(std::move(normalized));
  } catch (const json::exception& error) {
    return absl::InvalidArgumentError(absl::StrCat("malformed tokenizer.json: ", error.what()));
  }

  // The decoding table: vocabulary tokens as raw bytes, added tokens as their content (mapped through the
  // byte-level alphabet when every character belongs to it, as the Hugging Face decoder does).
  size_t size = tokenizer->model_->vocab_size();
  for (const auto& token : tokenizer->added_tokens_) size = std::max(size, static_cast<size_t>(token.id) + 1);
  tokenizer->id_to_bytes_.resize(size);
  tokenizer->special_.assign(size, false);
  for (size_t id = 0; id < tokenizer->model_->vocab_size(); ++id) {
    tokenizer->id_to_bytes_[id] = std::string(tokenizer->model_->TokenBytes(static_cast<int32_t>(id)));
  }
  const ByteLevelAlphabet& alphabet = ByteLevelAlphabet::Get();
  for (const auto& token : tokenizer->added_tokens_) {
    tokenizer->id_to_bytes_[token.id] = alphabet.ToBytes(token.content).value_or(token.content);
    tokenizer->special_[token.id] = token.special;
  }
  return tokenizer;
}

}  // namespace llmc::tokenizer
