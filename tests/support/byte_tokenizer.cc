#include "tests/support/byte_tokenizer.h"

#include <stdexcept>

#include "nlohmann/json.hpp"
#include "worker/tokenizer/byte_level.h"

namespace llmc::testing {

std::unique_ptr<tokenizer::Tokenizer> MakeByteTokenizer() {
  using nlohmann::json;
  const tokenizer::ByteLevelAlphabet& alphabet = tokenizer::ByteLevelAlphabet::Get();
  json vocab = json::object();
  for (int byte = 0; byte < 256; ++byte) vocab[alphabet.CharFor(static_cast<uint8_t>(byte))] = byte;
  json added = json::array();
  const std::pair<int32_t, const char*> specials[] = {
      {kEndOfText, "<|endoftext|>"}, {kImStart, "<|im_start|>"}, {kImEnd, "<|im_end|>"}};
  for (const auto& [id, content] : specials) added.push_back({{"id", id}, {"content", content}, {"special", true}});
  const json file = {
      {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", json::array()}}},
      {"normalizer", nullptr},
      {"pre_tokenizer", {{"type", "Split"}, {"pattern", {{"Regex", " ?[a-z]+|\\s+|."}}}, {"behavior", "Isolated"}}},
      {"decoder", {{"type", "ByteLevel"}}},
      {"added_tokens", added}};
  auto tokenizer = tokenizer::Tokenizer::FromJson(file.dump());
  if (!tokenizer.ok()) throw std::runtime_error("byte tokenizer: " + tokenizer.status().ToString());
  return std::move(*tokenizer);
}

}  // namespace llmc::testing
