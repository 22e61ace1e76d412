// The grammar engine's speed over a corpus of JSON schemas with a real vocabulary: time to compile each schema
// (JSON Schema to grammar to automaton, no cache) and time to fill each token mask along a random walk that
// draws uniformly among the allowed tokens, as a random-weight model would. Prints percentiles; judges nothing.
//
//   llmc_grammar_bench <tokenizer.json> <schema_corpus.json> [walks per schema] [max tokens per walk]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "nlohmann/json.hpp"
#include "worker/grammar/automaton.h"
#include "worker/grammar/json_schema_compiler.h"
#include "worker/grammar/matcher.h"
#include "worker/grammar/token_masks.h"
#include "worker/grammar/vocabulary.h"
#include "worker/tokenizer/tokenizer.h"

namespace {

using llmc::grammar::GrammarMatcher;

double Percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t index = std::min(values.size() - 1, static_cast<size_t>(p / 100.0 * values.size()));
  return values[index];
}

void Report(const char* what, const std::vector<double>& micros) {
  double sum = 0;
  for (const double value : micros) sum += value;
  std::printf("%-28s n=%-7zu mean %9.1f us  p50 %9.1f us  p90 %9.1f us  p99 %9.1f us  max %9.1f us\n", what,
              micros.size(), micros.empty() ? 0 : sum / micros.size(), Percentile(micros, 50), Percentile(micros, 90),
              Percentile(micros, 99), Percentile(micros, 100));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s <tokenizer.json> <schema_corpus.json> [walks] [max_tokens]\n", argv[0]);
    return 2;
  }
  const int walks = argc > 3 ? std::atoi(argv[3]) : 2;
  const int max_tokens = argc > 4 ? std::atoi(argv[4]) : 256;
  auto tokenizer = llmc::tokenizer::Tokenizer::FromFile(argv[1]);
  if (!tokenizer.ok()) {
    std::fprintf(stderr, "%s\n", tokenizer.status().ToString().c_str());
    return 1;
  }
  const size_t vocab = (*tokenizer)->vocab_size();
  std::vector<std::string> bytes(vocab);
  std::vector<bool> special(vocab);
  for (size_t id = 0; id < vocab; ++id) {
    bytes[id] = std::string((*tokenizer)->TokenBytes(static_cast<int32_t>(id)));
    special[id] = (*tokenizer)->IsSpecial(static_cast<int32_t>(id));
  }
  const int32_t eos = (*tokenizer)->TokenId("<|im_end|>");
  absl::Time start = absl::Now();
  auto index = std::make_shared<const llmc::grammar::VocabularyIndex>(bytes, special, std::vector<int32_t>{eos});
  std::printf("vocabulary: %zu tokens, %zu trie nodes, indexed in %.1f ms\n", vocab, index->nodes().size(),
              absl::ToDoubleMilliseconds(absl::Now() - start));

  {
    // One full walk of the trie: the first mask inside a JSON string body (later ones come from the cache).
    llmc::grammar::Grammar string_grammar;
    string_grammar.AddRule(
        "root", llmc::grammar::Expr::Sequence(
                    {llmc::grammar::Expr::Literal("\""),
                     llmc::grammar::Expr::Star(llmc::grammar::Expr::NegatedCharClass({{'"', '"'}, {'\\', '\\'}})),
                     llmc::grammar::Expr::Literal("\"")}));
    auto automaton = llmc::grammar::CompileGrammar(string_grammar).value();
    const int32_t body = automaton->Next(automaton->rules()[0].start, '"');
    std::vector<double> walk_us;
    for (int round = 0; round < 20; ++round) {
      start = absl::Now();
      auto table = llmc::grammar::BuildTerminalTable(*automaton, body, *index);
      walk_us.push_back(absl::ToDoubleMicroseconds(absl::Now() - start));
    }
    Report("trie walk, JSON string body", walk_us);
  }
  std::ifstream file(argv[2]);
  std::stringstream text;
  text << file.rdbuf();
  const nlohmann::ordered_json corpus = nlohmann::ordered_json::parse(text.str());
  std::vector<double> compile_us, mask_us, first_mask_us;
  int compiled = 0, refused = 0, finished = 0, walks_run = 0;
  std::mt19937_64 rng(1);
  std::vector<uint64_t> mask(llmc::grammar::MaskWords(vocab));
  for (const auto& entry : corpus) {
    llmc::grammar::JsonSchemaOptions options;
    options.strict = entry.value("strict", false);
    start = absl::Now();
    auto grammar = llmc::grammar::CompileJsonSchema(entry["schema"], options);
    absl::StatusOr<std::shared_ptr<const llmc::grammar::CompiledGrammar>> automaton =
        grammar.ok() ? llmc::grammar::CompileGrammar(*grammar) : grammar.status();
    const double micros = absl::ToDoubleMicroseconds(absl::Now() - start);
    if (std::getenv("LLMC_BENCH_PRINT_GRAMMARS") != nullptr && grammar.ok()) {
      std::printf("%s:\n%s\n", entry.value("name", "?").c_str(), grammar->ToString().c_str());
    }
    if (!automaton.ok()) {
      ++refused;
      continue;
    }
    ++compiled;
    compile_us.push_back(micros);
    for (int walk = 0; walk < walks; ++walk) {
      ++walks_run;
      GrammarMatcher matcher(*automaton, index);
      for (int step = 0; step < max_tokens && !matcher.IsTerminated(); ++step) {
        start = absl::Now();
        matcher.FillMask(absl::MakeSpan(mask));
        const double fill = absl::ToDoubleMicroseconds(absl::Now() - start);
        mask_us.push_back(fill);
        if (walk == 0 && step == 0) first_mask_us.push_back(fill);
        std::vector<int32_t> allowed;
        for (size_t w = 0; w < mask.size(); ++w) {
          for (uint64_t bits = mask[w]; bits != 0; bits &= bits - 1) {
            allowed.push_back(static_cast<int32_t>(w * 64 + __builtin_ctzll(bits)));
          }
        }
        if (allowed.empty()) break;
        // Ending as soon as the grammar allows it keeps walks short; a model is free to go on.
        int32_t token = allowed[std::uniform_int_distribution<size_t>(0, allowed.size() - 1)(rng)];
        if (matcher.CanEnd() && std::uniform_int_distribution<int>(0, 3)(rng) == 0) token = eos;
        if (!matcher.AcceptToken(token)) {
          std::fprintf(stderr, "%s: allowed token %d refused\n", entry.value("name", "?").c_str(), token);
          return 1;
        }
        if (token == eos) ++finished;
      }
    }
  }
  std::printf("schemas: %d compiled, %d refused (%.1f %% compile); walks %d, %d ended by EOS\n", compiled, refused,
              100.0 * compiled / std::max(1, compiled + refused), walks_run, finished);
  Report("compile (schema to automaton)", compile_us);
  Report("mask fill, every step", mask_us);
  Report("mask fill, first step", first_mask_us);
  return 0;
}
