// The C++ tokenizer against the JavaScript reference encoders of real vocabularies: byte-level (Qwen3,
// Llama 3) and SentencePiece-style (Llama 2, Gemma 3 with 262k tokens).
#include <utf8proc.h>

#include <cstdlib>

#include "common/utf8.h"
#include "tests/support/catch.h"
#include "tests/support/tokenizer_files.h"
#include "worker/tokenizer/incremental_detokenizer.h"

namespace llmc::testing {
namespace {

std::string Nfc(const std::string& text) {
  utf8proc_uint8_t* out = nullptr;
  const auto length = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()), text.size(), &out,
                                   static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
  std::string result(reinterpret_cast<const char*>(out), length);
  std::free(out);
  return result;
}

constexpr const char* kModels[] = {"qwen3", "llama3", "llama2", "gemma3"};

// Hugging Face's decode drops the text's leading space for Llama 2 (the decoder's Strip), which streaming
// keeps: generated text continues a prompt.
std::string AsDecoded(const std::string& model, std::string streamed) {
  if (model == "llama2" && !streamed.empty() && streamed[0] == ' ') streamed.erase(0, 1);
  return streamed;
}

std::string Describe(const std::vector<int32_t>& ids) {
  std::string text;
  for (size_t i = 0; i < ids.size() && i < 40; ++i) text += std::to_string(ids[i]) + " ";
  return text;
}

TEST_CASE("tokenizer parity: ids equal the reference encoder on the whole corpus", "[integration][tokenizer]") {
  const auto corpus = LoadTokenizerCorpus();
  REQUIRE(corpus.size() > 100);
  for (const std::string model : kModels) {
    const auto& tokenizer = RealTokenizer(model);
    const auto reference = ReferenceEncodings(model);
    REQUIRE(reference.size() == corpus.size());
    size_t compared = 0;
    for (size_t i = 0; i < corpus.size(); ++i) {
      if (corpus[i].invalid) continue;
      const auto ids = tokenizer.Encode(corpus[i].text);
      REQUIRE(ids.ok());
      INFO(model << " " << corpus[i].name << "\n ours: " << Describe(*ids) << "\n  ref: " << Describe(reference[i]));
      CHECK(*ids == reference[i]);
      ++compared;
    }
    CHECK(compared > 100);
  }
}

TEST_CASE("tokenizer: invalid UTF-8 input is refused with INVALID_ARGUMENT", "[integration][tokenizer]") {
  size_t invalid = 0;
  for (const auto& entry : LoadTokenizerCorpus()) {
    if (!entry.invalid) continue;
    ++invalid;
    for (const std::string model : kModels) {
      const auto ids = RealTokenizer(model).Encode(entry.text);
      INFO(model << " " << entry.name);
      REQUIRE_FALSE(ids.ok());
      CHECK(ids.status().code() == absl::StatusCode::kInvalidArgument);
      CHECK_THAT(std::string(ids.status().message()), Catch::Contains("UTF-8"));
    }
  }
  CHECK(invalid >= 4);
}

TEST_CASE("tokenizer: decode(encode(x)) gives back x, NFC-normalised for Qwen3", "[integration][tokenizer]") {
  for (const std::string model : kModels) {
    const auto& tokenizer = RealTokenizer(model);
    for (const auto& entry : LoadTokenizerCorpus()) {
      if (entry.invalid) continue;
      const auto ids = tokenizer.Encode(entry.text);
      REQUIRE(ids.ok());
      const auto text = tokenizer.Decode(*ids, /*skip_special_tokens=*/false);
      REQUIRE(text.ok());
      INFO(model << " " << entry.name);
      CHECK(*text == (model == "qwen3" ? Nfc(entry.text) : entry.text));
    }
  }
}

TEST_CASE("incremental detokenizer: streamed text equals the full decode, token by token, never half a character",
          "[integration][tokenizer]") {
  for (const std::string model : kModels) {
    const auto& tokenizer = RealTokenizer(model);
    for (const bool skip_special : {true, false}) {
      for (const auto& entry : LoadTokenizerCorpus()) {
        if (entry.invalid) continue;
        const auto ids = tokenizer.Encode(entry.text);
        REQUIRE(ids.ok());
        tokenizer::IncrementalDetokenizer detokenizer(tokenizer, skip_special);
        std::string streamed;
        for (int32_t id : *ids) {
          const std::string piece = detokenizer.Add(id);
          INFO(model << " " << entry.name << " token " << id);
          CHECK_FALSE(FindInvalidUtf8(piece).has_value());
          streamed += piece;
        }
        streamed += detokenizer.Finish();
        INFO(model << " " << entry.name);
        CHECK(AsDecoded(model, streamed) == tokenizer.Decode(*ids, skip_special).value());
      }
    }
  }
}

TEST_CASE("tokenizer: special tokens, BOS templates, counting and decoding errors", "[integration][tokenizer]") {
  const auto& qwen = RealTokenizer("qwen3");
  CHECK(qwen.TokenId("<|im_start|>") == 151644);
  CHECK(qwen.TokenId("<|im_end|>") == 151645);
  CHECK(qwen.IsSpecial(151645));
  CHECK_FALSE(qwen.IsSpecial(qwen.TokenId("<think>")));
  CHECK(qwen.Encode("Hello world").value() == std::vector<int32_t>{9707, 1879});
  CHECK(qwen.CountTokens("<|im_start|>user\nHello world<|im_end|>").value() == 6);
  CHECK(qwen.Decode({151644, 9707, 151645}, true).value() == "Hello");
  CHECK(qwen.Decode({151644, 9707, 151645}, false).value() == "<|im_start|>Hello<|im_end|>");
  CHECK(qwen.Decode({-1}).status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(qwen.Decode({static_cast<int32_t>(qwen.vocab_size())}).status().code() == absl::StatusCode::kInvalidArgument);

  const auto& llama = RealTokenizer("llama3");
  CHECK(llama.TokenId("<|begin_of_text|>") == 128000);
  CHECK(llama.Encode("<|begin_of_text|>Hello").value() == std::vector<int32_t>{128000, 9906});
  // Neither packaged file has a TemplateProcessing post-processor (ByteLevel only), so nothing is added;
  // the BOS comes from the chat template or the model manifest.
  CHECK(llama.Encode("Hello", true).value() == llama.Encode("Hello", false).value());
  CHECK(qwen.Encode("Hello", true).value() == qwen.Encode("Hello", false).value());
}

TEST_CASE("incremental detokenizer: a character split over byte tokens is released whole", "[integration][tokenizer]") {
  const auto& qwen = RealTokenizer("qwen3");
  // "😀" is F0 9F 98 80: spell it with the four single-byte tokens.
  tokenizer::IncrementalDetokenizer detokenizer(qwen);
  std::vector<int32_t> ids;
  for (unsigned char byte : std::string("\xF0\x9F\x98\x80")) {
    const int32_t id = qwen.TokenId(std::string(1, static_cast<char>(byte)));
    REQUIRE(id >= 0);
    ids.push_back(id);
  }
  CHECK(detokenizer.Add(ids[0]).empty());
  CHECK(detokenizer.Add(ids[1]).empty());
  CHECK(detokenizer.Add(ids[2]).empty());
  CHECK(detokenizer.Add(ids[3]) == "😀");
  // An unfinished character at the end of a stream becomes one U+FFFD.
  tokenizer::IncrementalDetokenizer truncated(qwen);
  CHECK(truncated.Add(ids[0]).empty());
  CHECK(truncated.Add(ids[1]).empty());
  CHECK(truncated.Finish() == "\xEF\xBF\xBD");
}

}  // namespace
}  // namespace llmc::testing
