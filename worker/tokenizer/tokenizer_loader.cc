// Tokenizer::FromJson: reads the parts of tokenizer.json and refuses, by name, what is not supported.
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
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
  SplitBehavior behavior = SplitBehavior::kIsolated;
  bool add_prefix_space = false;
  bool byte_level = false;
  Metaspace metaspace;
};

absl::StatusOr<SplitBehavior> ReadSplitBehavior(const std::string& behavior) {
  if (behavior == "Isolated") return SplitBehavior::kIsolated;
  if (behavior == "MergedWithPrevious") return SplitBehavior::kMergedWithPrevious;
  if (behavior == "MergedWithNext") return SplitBehavior::kMergedWithNext;
  if (behavior == "Removed") return SplitBehavior::kRemoved;
  return absl::UnimplementedError(absl::StrCat("unsupported Split pre-tokenizer behavior '", behavior, "'"));
}

absl::StatusOr<Metaspace::Prepend> ReadPrependScheme(const json& node) {
  // Older files have only add_prefix_space (true meant "always").
  const std::string scheme =
      node.value("prepend_scheme", node.value("add_prefix_space", true) ? std::string("always") : "never");
  if (scheme == "always") return Metaspace::Prepend::kAlways;
  if (scheme == "first") return Metaspace::Prepend::kFirst;
  if (scheme == "never") return Metaspace::Prepend::kNever;
  return absl::UnimplementedError(absl::StrCat("unsupported Metaspace prepend_scheme '", scheme, "'"));
}

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
    ASSIGN_OR_RETURN(plan.behavior, ReadSplitBehavior(node.value("behavior", "")));
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
    plan.byte_level = true;
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
  if (type == "Metaspace") {
    if (!first || !plan.pattern.empty()) {
      return absl::UnimplementedError("unsupported pre-tokenizer: Metaspace after another pre-tokenizer");
    }
    plan.metaspace.enabled = true;
    plan.metaspace.replacement = node.value("replacement", std::string(kMetaspaceReplacement));
    if (plan.metaspace.replacement.empty()) return absl::InvalidArgumentError("Metaspace with an empty replacement");
    ASSIGN_OR_RETURN(plan.metaspace.prepend, ReadPrependScheme(node));
    plan.metaspace.split = node.value("split", true);
    return absl::OkStatus();
  }
  return absl::UnimplementedError(absl::StrCat("unsupported tokenizer pre-tokenizer '", type, "'"));
}

// How token text turns back into bytes (the tokenizer.json "decoder").
struct DecoderPlan {
  bool byte_level = false;
  std::vector<std::pair<std::string, std::string>> replacements;  // applied to each token, in order
  bool byte_fallback = false;                                     // "<0xNN>" is the byte NN
  size_t strip_leading_spaces = 0;                                // from the start of the decoded text
};

absl::Status AddDecoder(const json& node, DecoderPlan& plan) {
  if (node.is_null()) return absl::OkStatus();
  const std::string type = node.value("type", "");
  if (type == "ByteLevel") {
    plan.byte_level = true;
  } else if (type == "Sequence") {
    for (const auto& part : node.value("decoders", json::array())) RETURN_IF_ERROR(AddDecoder(part, plan));
  } else if (type == "Replace") {
    const json pattern = node.value("pattern", json::object());
    if (!pattern.contains("String") || !pattern["String"].is_string() || pattern["String"].get<std::string>().empty()) {
      return absl::UnimplementedError("unsupported tokenizer decoder: Replace without a literal string pattern");
    }
    plan.replacements.emplace_back(pattern["String"].get<std::string>(), node.value("content", ""));
  } else if (type == "ByteFallback") {
    plan.byte_fallback = true;
  } else if (type == "Fuse") {
    // Joining the tokens' text is what decoding does anyway.
  } else if (type == "Strip") {
    if (node.value("content", " ") != " " || node.value("stop", 0) != 0) {
      return absl::UnimplementedError("unsupported tokenizer decoder: Strip of anything but leading spaces");
    }
    plan.strip_leading_spaces = node.value("start", 0);
  } else if (type == "Metaspace") {
    plan.replacements.emplace_back(node.value("replacement", std::string(kMetaspaceReplacement)), " ");
    ASSIGN_OR_RETURN(const Metaspace::Prepend prepend, ReadPrependScheme(node));
    if (prepend != Metaspace::Prepend::kNever) plan.strip_leading_spaces = 1;
  } else {
    return absl::UnimplementedError(absl::StrCat("unsupported tokenizer decoder '", type, "'"));
  }
  return absl::OkStatus();
}

// The bytes one vocabulary token (spelled as its text) decodes to.
std::string DecodeCharacterToken(const DecoderPlan& plan, absl::string_view token) {
  if (plan.byte_fallback && token.size() == 6 && absl::StartsWith(token, "<0x") && token[5] == '>') {
    int value = 0;
    if (absl::SimpleHexAtoi(token.substr(3, 2), &value)) return std::string(1, static_cast<char>(value));
  }
  std::string text(token);
  for (const auto& [from, to] : plan.replacements) text = absl::StrReplaceAll(text, {{from, to}});
  return text;
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
  DecoderPlan decoder;
  try {
    PreTokenizerPlan plan;
    const json pre_tokenizer = root.value("pre_tokenizer", json());
    if (!pre_tokenizer.is_null()) RETURN_IF_ERROR(AddPreTokenizer(pre_tokenizer, true, plan));
    RETURN_IF_ERROR(AddDecoder(root.value("decoder", json()), decoder));
    // Byte-level files say so in their pre-tokenizer or decoder; the rest (SentencePiece-style) work on
    // characters.
    const BpeSymbols symbols = plan.byte_level || decoder.byte_level ? BpeSymbols::kBytes : BpeSymbols::kCharacters;
    ASSIGN_OR_RETURN(tokenizer->model_, BpeModel::FromJson(root.value("model", json::object()), symbols));
    ASSIGN_OR_RETURN(tokenizer->normalizer_, Normalizer::FromJson(root.value("normalizer", json())));
    if (!plan.pattern.empty()) {
      ASSIGN_OR_RETURN(tokenizer->split_, SplitPattern::Compile(plan.pattern, plan.behavior));
    }
    tokenizer->add_prefix_space_ = plan.add_prefix_space;
    tokenizer->metaspace_ = plan.metaspace;
    tokenizer->strip_leading_spaces_ = decoder.strip_leading_spaces;
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

  // The decoding table. Byte-level: vocabulary tokens as raw bytes, added tokens as their content (mapped
  // through the byte-level alphabet when every character belongs to it, as the Hugging Face decoder does).
  // Characters: each token, added ones included, through the decoder's replacements and byte fallback.
  const bool byte_level = tokenizer->model_->symbols() == BpeSymbols::kBytes;
  size_t size = tokenizer->model_->vocab_size();
  for (const auto& token : tokenizer->added_tokens_) size = std::max(size, static_cast<size_t>(token.id) + 1);
  std::vector<std::string> id_to_bytes(size);
  tokenizer->special_.assign(size, false);
  for (size_t id = 0; id < tokenizer->model_->vocab_size(); ++id) {
    const absl::string_view token = tokenizer->model_->TokenBytes(static_cast<int32_t>(id));
    id_to_bytes[id] = byte_level ? std::string(token) : DecodeCharacterToken(decoder, token);
  }
  const ByteLevelAlphabet& alphabet = ByteLevelAlphabet::Get();
  for (const auto& token : tokenizer->added_tokens_) {
    id_to_bytes[token.id] = byte_level ? alphabet.ToBytes(token.content).value_or(token.content)
                                       : DecodeCharacterToken(decoder, token.content);
    tokenizer->special_[token.id] = token.special;
  }
  RETURN_IF_ERROR(tokenizer->id_to_bytes_.Assign(id_to_bytes, /*indexed=*/false));
  return tokenizer;
}

}  // namespace llmc::tokenizer
