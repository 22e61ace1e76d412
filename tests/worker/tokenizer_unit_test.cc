// The tokenizer's mechanics on small hand-made tokenizer.json files.
#include "nlohmann/json.hpp"
#include "tests/support/catch.h"
#include "worker/tokenizer/byte_level.h"
#include "worker/tokenizer/split_pattern.h"
#include "worker/tokenizer/token_strings.h"
#include "worker/tokenizer/tokenizer.h"

namespace llmc::tokenizer {
namespace {

using nlohmann::json;

// A byte-level BPE over all 256 bytes (ids 0..255 = the bytes) plus `merges` (raw-byte pairs), whose
// merged tokens take ids from 256 in order.
json TinyTokenizer(const std::vector<std::pair<std::string, std::string>>& merges) {
  const ByteLevelAlphabet& alphabet = ByteLevelAlphabet::Get();
  json vocab = json::object();
  for (int byte = 0; byte < 256; ++byte) vocab[alphabet.CharFor(static_cast<uint8_t>(byte))] = byte;
  json merge_list = json::array();
  int next_id = 256;
  for (const auto& [left, right] : merges) {
    const std::string merged = alphabet.FromBytes(left + right);
    if (!vocab.contains(merged)) vocab[merged] = next_id++;
    merge_list.push_back(json::array({alphabet.FromBytes(left), alphabet.FromBytes(right)}));
  }
  return json{
      {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", merge_list}}},
      {"normalizer", nullptr},
      {"pre_tokenizer", {{"type", "Split"}, {"pattern", {{"Regex", " ?[a-z]+|\\s+|."}}}, {"behavior", "Isolated"}}},
      {"decoder", {{"type", "ByteLevel"}}},
      {"added_tokens", json::array()}};
}

std::unique_ptr<Tokenizer> Load(const json& file) {
  auto tokenizer = Tokenizer::FromJson(file.dump());
  REQUIRE(tokenizer.ok());
  return std::move(*tokenizer);
}

TEST_CASE("bpe: merges apply by rank, leftmost first, not left to right", "[unit][tokenizer]") {
  // "b c" has the best rank, so "abc" becomes a + bc even though "a b" could merge first from the left.
  auto tokenizer = Load(TinyTokenizer({{"b", "c"}, {"a", "b"}, {"a", "bc"}}));
  const int32_t bc = tokenizer->TokenId("bc"), abc = tokenizer->TokenId("abc"), ab = tokenizer->TokenId("ab");
  CHECK(tokenizer->Encode("abc").value() == std::vector<int32_t>{abc});
  CHECK(tokenizer->Encode("abab").value() == std::vector<int32_t>{ab, ab});
  CHECK(tokenizer->Encode("bcab").value() == std::vector<int32_t>{bc, ab});
  // Equal ranks can only come from the same pair: "aaaa" with a+a merges pairs from the left.
  auto repeated = Load(TinyTokenizer({{"a", "a"}}));
  const int32_t aa = repeated->TokenId("aa");
  CHECK(repeated->Encode("aaaaa").value() == std::vector<int32_t>{aa, aa, 'a'});
  // A long word goes through the same heap path.
  const std::string long_word(5000, 'a');
  CHECK(repeated->Encode(long_word).value().size() == 2500);
  CHECK(repeated->Decode(repeated->Encode(long_word).value()).value() == long_word);
}

TEST_CASE("bpe: ignore_merges takes a whole word that is in the vocabulary", "[unit][tokenizer]") {
  json file = TinyTokenizer({{"b", "c"}, {"a", "b"}});
  file["model"]["vocab"][ByteLevelAlphabet::Get().FromBytes("abc")] = 400;  // no merge path reaches it
  CHECK(Load(file)->Encode("abc").value() == std::vector<int32_t>{'a', Load(file)->TokenId("bc")});
  file["model"]["ignore_merges"] = true;
  CHECK(Load(file)->Encode("abc").value() == std::vector<int32_t>{400});
}

TEST_CASE("added tokens: leftmost-longest, before the regex, honouring lstrip and rstrip", "[unit][tokenizer]") {
  json file = TinyTokenizer({});
  file["added_tokens"] = json::array({
      {{"id", 300}, {"content", "<x>"}, {"special", true}},
      {{"id", 301}, {"content", "<x>y"}, {"special", false}},
      {{"id", 302}, {"content", "[M]"}, {"special", true}, {"lstrip", true}, {"rstrip", true}},
  });
  auto tokenizer = Load(file);
  CHECK(tokenizer->Encode("a<x>b").value() == std::vector<int32_t>{'a', 300, 'b'});
  CHECK(tokenizer->Encode("<x>y<x>").value() == std::vector<int32_t>{301, 300});
  CHECK(tokenizer->Encode("a  [M]  b").value() == std::vector<int32_t>{'a', 302, 'b'});
  CHECK(tokenizer->Decode({300, 'a', 301}, true).value() == "a<x>y");  // only special ones are skipped
  CHECK(tokenizer->Decode({300, 'a'}, false).value() == "<x>a");
}

TEST_CASE("post-processor: TemplateProcessing ids wrap the sequence only when asked", "[unit][tokenizer]") {
  json file = TinyTokenizer({});
  file["added_tokens"] = json::array(
      {{{"id", 300}, {"content", "<s>"}, {"special", true}}, {{"id", 301}, {"content", "</s>"}, {"special", true}}});
  file["post_processor"] = {
      {"type", "Sequence"},
      {"processors",
       json::array({{{"type", "ByteLevel"}},
                    {{"type", "TemplateProcessing"},
                     {"single", json::array({{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}},
                                             {{"Sequence", {{"id", "A"}, {"type_id", 0}}}},
                                             {{"SpecialToken", {{"id", "</s>"}, {"type_id", 0}}}}})},
                     {"special_tokens",
                      {{"<s>", {{"id", "<s>"}, {"ids", {300}}}}, {"</s>", {{"id", "</s>"}, {"ids", {301}}}}}}}})}};
  auto tokenizer = Load(file);
  CHECK(tokenizer->Encode("ab", true).value() == std::vector<int32_t>{300, 'a', 'b', 301});
  CHECK(tokenizer->Encode("ab", false).value() == std::vector<int32_t>{'a', 'b'});
}

TEST_CASE("tokenizer.json: unsupported or broken files fail with errors that name the problem", "[unit][tokenizer]") {
  const auto error = [](const json& file) { return std::string(Tokenizer::FromJson(file.dump()).status().message()); };
  json file = TinyTokenizer({});
  file["model"]["type"] = "WordPiece";
  CHECK_THAT(error(file), Catch::Contains("unsupported tokenizer model type 'WordPiece'"));
  file = TinyTokenizer({});
  file["model"]["byte_fallback"] = true;
  CHECK_THAT(error(file), Catch::Contains("byte_fallback"));
  file = TinyTokenizer({});
  file["normalizer"] = {{"type", "Lowercase"}};
  CHECK_THAT(error(file), Catch::Contains("unsupported tokenizer normalizer 'Lowercase'"));
  file = TinyTokenizer({});
  file["pre_tokenizer"] = {{"type", "Whitespace"}};
  CHECK_THAT(error(file), Catch::Contains("unsupported tokenizer pre-tokenizer 'Whitespace'"));
  file = TinyTokenizer({});
  file["normalizer"] = {{"type", "Replace"}, {"pattern", {{"Regex", " +"}}}, {"content", "_"}};
  CHECK_THAT(error(file), Catch::Contains("Replace with a regex"));
  file = TinyTokenizer({});
  file["decoder"] = {{"type", "WordPiece"}};
  CHECK_THAT(error(file), Catch::Contains("unsupported tokenizer decoder 'WordPiece'"));
  file = TinyTokenizer({{"a", "b"}});
  file["model"]["merges"].push_back(json::array({"q", "zzz"}));
  CHECK_THAT(error(file), Catch::Contains("not in the vocab"));
  CHECK_THAT(std::string(Tokenizer::FromJson("{not json").status().message()), Catch::Contains("not valid JSON"));
  CHECK(Tokenizer::FromFile("/nonexistent/tokenizer.json").status().code() == absl::StatusCode::kNotFound);
}

TEST_CASE("split pattern: \\s means Unicode White_Space, in and out of classes", "[unit][tokenizer]") {
  CHECK(RewriteWhitespaceClasses("a\\sb") ==
        "a[\\t\\n\\x{0B}\\f\\r \\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}"
        "\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}]b");
  CHECK(RewriteWhitespaceClasses("[^\\s\\p{L}]").rfind("[^\\t\\n", 0) == 0);
  CHECK(RewriteWhitespaceClasses("\\\\s") == "\\\\s");  // an escaped backslash followed by 's'
  auto pattern = SplitPattern::Compile("\\s+|\\S+");
  REQUIRE(pattern.ok());
  std::vector<absl::string_view> pieces;
  (*pattern)->Split("a\u3000b\u00a0 c", pieces);
  CHECK(pieces == std::vector<absl::string_view>{"a", "\u3000", "b", "\u00a0 ", "c"});
  CHECK_FALSE(SplitPattern::Compile("(unclosed").ok());
}

}  // namespace
}  // namespace llmc::tokenizer

namespace llmc::tokenizer {
namespace {

constexpr const char* kMarker = "\xE2\x96\x81";  // "▁"

// A SentencePiece-style file: characters a, b, c, "▁" and merges into "▁a", "▁ab"; byte tokens for
// 0xC3 and 0xA9 only (so "é" falls back to bytes, "ü" to <unk>).
json TinySentencePiece() {
  const std::string marker = kMarker;
  json vocab = {{"<unk>", 0}, {"<s>", 1}, {"<0xC3>", 2}, {"<0xA9>", 3},     {marker, 4},
                {"a", 5},     {"b", 6},   {"c", 7},      {marker + "a", 8}, {marker + "ab", 9}};
  return json{
      {"model",
       {{"type", "BPE"},
        {"vocab", vocab},
        {"merges", json::array({marker + " a", marker + "a b"})},
        {"unk_token", "<unk>"},
        {"fuse_unk", true},
        {"byte_fallback", true}}},
      {"normalizer",
       {{"type", "Sequence"},
        {"normalizers", json::array({{{"type", "Prepend"}, {"prepend", marker}},
                                     {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", marker}}})}}},
      {"pre_tokenizer", nullptr},
      {"decoder",
       {{"type", "Sequence"},
        {"decoders", json::array({{{"type", "Replace"}, {"pattern", {{"String", marker}}}, {"content", " "}},
                                  {{"type", "ByteFallback"}},
                                  {{"type", "Fuse"}},
                                  {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}})}}},
      {"post_processor",
       {{"type", "TemplateProcessing"},
        {"single", json::array({{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}},
                                {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}})},
        {"special_tokens", {{"<s>", {{"id", "<s>"}, {"ids", {1}}, {"tokens", {"<s>"}}}}}}}},
      {"added_tokens", json::array({{{"id", 0}, {"content", "<unk>"}, {"special", true}},
                                    {{"id", 1}, {"content", "<s>"}, {"special", true}}})}};
}

std::unique_ptr<Tokenizer> LoadFile(const json& file) {
  auto tokenizer = Tokenizer::FromJson(file.dump());
  REQUIRE(tokenizer.ok());
  return std::move(*tokenizer);
}

TEST_CASE("sentencepiece bpe: Prepend/Replace normalizers, character merges, byte fallback, fused unk",
          "[unit][tokenizer]") {
  auto tokenizer = LoadFile(TinySentencePiece());
  using Ids = std::vector<int32_t>;
  CHECK(tokenizer->Encode("ab").value() == Ids{9});                   // ▁ab
  CHECK(tokenizer->Encode("ab c").value() == Ids{9, 4, 7});           // ▁ab ▁ c
  CHECK(tokenizer->Encode("ab", true).value() == Ids{1, 9});          // BOS from the post-processor
  CHECK(tokenizer->Encode("a\xC3\xA9").value() == Ids{8, 2, 3});      // "é" as <0xC3> <0xA9>
  CHECK(tokenizer->Encode("\xC3\xBC\xC3\xBC").value() == Ids{4, 0});  // "üü": one fused <unk>
  // Each section between added tokens is normalised on its own, so it gets its own "▁".
  CHECK(tokenizer->Encode("<s>ab").value() == Ids{1, 9});
  // Decoding: "▁" is a space, byte tokens are bytes, and the leading space goes.
  CHECK(tokenizer->Decode({9, 4, 7}).value() == "ab c");
  CHECK(tokenizer->Decode({8, 2, 3}).value() == "a\xC3\xA9");
  CHECK(tokenizer->Decode({1, 9}, /*skip_special_tokens=*/true).value() == "ab");
  CHECK(tokenizer->TokenBytes(9) == " ab");  // streaming keeps it
  CHECK(tokenizer->TokenBytes(2) == "\xC3");
}

TEST_CASE("sentencepiece bpe: the Metaspace pre-tokenizer and decoder", "[unit][tokenizer]") {
  json file = TinySentencePiece();
  file["normalizer"] = nullptr;
  file["pre_tokenizer"] = {
      {"type", "Metaspace"}, {"replacement", kMarker}, {"prepend_scheme", "first"}, {"split", true}};
  file["decoder"] = {{"type", "Metaspace"}, {"replacement", kMarker}, {"prepend_scheme", "first"}};
  auto tokenizer = LoadFile(file);
  using Ids = std::vector<int32_t>;
  CHECK(tokenizer->Encode("ab ab").value() == Ids{9, 9});
  // "first": only the first section gets the marker.
  CHECK(tokenizer->Encode("<s>ab").value() == Ids{1, 5, 6});
  CHECK(tokenizer->Decode({9, 9}).value() == "ab ab");
  file["pre_tokenizer"]["prepend_scheme"] = "always";
  CHECK(LoadFile(file)->Encode("<s>ab").value() == Ids{1, 9});
  file["pre_tokenizer"]["prepend_scheme"] = "sometimes";
  CHECK_THAT(std::string(Tokenizer::FromJson(file.dump()).status().message()), Catch::Contains("sometimes"));
}

TEST_CASE("split pattern: merged-with-previous, merged-with-next and removed behaviours", "[unit][tokenizer]") {
  const auto split = [](SplitBehavior behavior, absl::string_view text) {
    auto pattern = SplitPattern::Compile("-", behavior);
    REQUIRE(pattern.ok());
    std::vector<absl::string_view> pieces;
    (*pattern)->Split(text, pieces);
    return std::vector<std::string>(pieces.begin(), pieces.end());
  };
  using Pieces = std::vector<std::string>;
  CHECK(split(SplitBehavior::kIsolated, "a-b--c") == Pieces{"a", "-", "b", "-", "-", "c"});
  CHECK(split(SplitBehavior::kMergedWithPrevious, "a-b--c") == Pieces{"a-", "b-", "-", "c"});
  CHECK(split(SplitBehavior::kMergedWithNext, "a-b--c") == Pieces{"a", "-b", "-", "-c"});
  CHECK(split(SplitBehavior::kRemoved, "a-b--c") == Pieces{"a", "b", "c"});
}

TEST_CASE("token strings: by id and by content, gaps, duplicates and the unindexed table", "[unit][tokenizer]") {
  TokenStrings table;
  CHECK(table.size() == 0);
  CHECK(table.Get(0).empty());
  CHECK(table.Find("a") == -1);
  const std::string with_nul("x\0y", 3);
  REQUIRE(table.Assign({"hello", "", "wor", "ld", "wor", with_nul, std::string(300, 'z')}, /*indexed=*/true).ok());
  CHECK(table.size() == 7);
  CHECK(table.Get(0) == "hello");
  CHECK(table.Get(1).empty());
  CHECK(table.Get(5) == with_nul);
  CHECK(table.Get(6) == std::string(300, 'z'));
  CHECK(table.Get(-1).empty());
  CHECK(table.Get(7).empty());
  CHECK(table.Find("hello") == 0);
  CHECK(table.Find("ld") == 3);
  CHECK(table.Find("wor") == 2);  // the lowest of equal strings
  CHECK(table.Find(with_nul) == 5);
  CHECK(table.Find(std::string(300, 'z')) == 6);
  CHECK(table.Find("") == -1);  // gaps are not tokens
  CHECK(table.Find("hell") == -1);
  CHECK(table.Find("world") == -1);
  REQUIRE(table.Assign({"a", "b"}, /*indexed=*/false).ok());
  CHECK(table.size() == 2);
  CHECK(table.Get(1) == "b");
  CHECK(table.Find("a") == -1);
}

}  // namespace
}  // namespace llmc::tokenizer
