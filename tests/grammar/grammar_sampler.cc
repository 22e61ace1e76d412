// llmc_grammar_sampler: random texts from the JSON Schema corpus's grammars, for tests/python/
// test_schema_corpus.py to check against python3-jsonschema (the proof that the grammars are sound).
//
//   llmc_grammar_sampler [--corpus FILE] [--samples K] [--seed N] [--budget BYTES] [--cap BYTES]
//                        [--whitespace N]
//
// For each corpus schema that is not marked refused: compile it, then K bounded random walks over the
// matcher's allowed bytes. A walk ends with some probability wherever the grammar may end, prefers closing
// bytes once past the budget, and is discarded past the hard cap. Prints one JSON line per text:
// {"name": ..., "text": ...}.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "worker/grammar/automaton.h"
#include "worker/grammar/json_schema_compiler.h"
#include "worker/grammar/matcher.h"

namespace {

using Json = nlohmann::ordered_json;
using llmc::grammar::CompiledGrammar;
using llmc::grammar::GrammarMatcher;

struct Flags {
  std::string corpus = LLMC_SOURCE_DIR "/tests/grammar/schema_corpus.json";
  int samples = 8;
  uint32_t seed = 20240601;
  size_t budget = 160;
  size_t cap = 4096;
  uint32_t whitespace = 0;  // JsonSchemaOptions::max_whitespace
};

// Printable ASCII is what models mostly write; other bytes (UTF-8 lead bytes) stay possible but rare.
double ByteWeight(int byte, bool past_budget) {
  if (past_budget && (byte == '"' || byte == '}' || byte == ']')) return 50.0;
  if (byte >= 0x20 && byte < 0x7F) return 1.0;
  if (byte == '\n' || byte == '\t') return 0.3;
  return 0.02;
}

// One walk, starting with `prefix` (a piece of a valid instance, so that walks also reach what random bytes
// rarely would, like the text an unanchored pattern needs); false if it was discarded (dead end or past the
// cap).
bool Walk(const std::shared_ptr<const CompiledGrammar>& compiled, const Flags& flags, const std::string& prefix,
          std::mt19937& random, std::string* text) {
  GrammarMatcher matcher(compiled, nullptr);
  text->clear();
  for (const char byte : prefix) {
    if (!matcher.AcceptBytes(std::string(1, byte))) break;
    *text += byte;
  }
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  while (true) {
    const bool past_budget = text->size() > flags.budget;
    if (matcher.CanEnd() && unit(random) < (past_budget ? 0.9 : 0.15)) return true;
    const std::bitset<256> allowed = matcher.AllowedNextBytes();
    if (allowed.none()) return matcher.CanEnd();
    if (text->size() >= flags.cap) return false;
    double total = 0;
    for (int byte = 0; byte < 256; ++byte) total += allowed[byte] ? ByteWeight(byte, past_budget) : 0.0;
    double pick = unit(random) * total;
    int chosen = -1;
    for (int byte = 0; byte < 256; ++byte) {
      if (!allowed[byte]) continue;
      chosen = byte;
      pick -= ByteWeight(byte, past_budget);
      if (pick <= 0) break;
    }
    const std::string next(1, static_cast<char>(chosen));
    if (!matcher.AcceptBytes(next)) {
      std::cerr << "allowed byte " << chosen << " was not accepted after: " << *text << "\n";
      std::exit(1);
    }
    *text += next;
  }
}

bool ParseFlags(int argc, char** argv, Flags* flags) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (i + 1 >= argc) return false;
    const std::string value = argv[++i];
    if (arg == "--corpus") {
      flags->corpus = value;
    } else if (arg == "--samples") {
      flags->samples = std::atoi(value.c_str());
    } else if (arg == "--seed") {
      flags->seed = static_cast<uint32_t>(std::strtoul(value.c_str(), nullptr, 10));
    } else if (arg == "--budget") {
      flags->budget = std::strtoul(value.c_str(), nullptr, 10);
    } else if (arg == "--cap") {
      flags->cap = std::strtoul(value.c_str(), nullptr, 10);
    } else if (arg == "--whitespace") {
      flags->whitespace = static_cast<uint32_t>(std::strtoul(value.c_str(), nullptr, 10));
    } else {
      return false;
    }
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  Flags flags;
  if (!ParseFlags(argc, argv, &flags)) {
    std::cerr << "usage: llmc_grammar_sampler [--corpus FILE] [--samples K] [--seed N] [--budget BYTES] "
                 "[--cap BYTES] [--whitespace N]\n";
    return 2;
  }
  std::ifstream file(flags.corpus);
  if (!file) {
    std::cerr << "cannot read " << flags.corpus << "\n";
    return 1;
  }
  const Json corpus = Json::parse(file);
  std::mt19937 random(flags.seed);
  int failures = 0;
  for (const Json& entry : corpus) {
    if (entry.contains("refused")) continue;
    const std::string name = entry.at("name").get<std::string>();
    llmc::grammar::JsonSchemaOptions options;
    options.strict = entry.value("strict", false);
    options.max_whitespace = flags.whitespace;
    absl::StatusOr<llmc::grammar::Grammar> grammar = llmc::grammar::CompileJsonSchema(entry.at("schema"), options);
    absl::StatusOr<std::shared_ptr<const CompiledGrammar>> compiled =
        grammar.ok() ? llmc::grammar::CompileGrammar(*grammar)
                     : absl::StatusOr<std::shared_ptr<const CompiledGrammar>>(grammar.status());
    if (!compiled.ok()) {
      std::cerr << name << ": " << compiled.status() << "\n";
      ++failures;
      continue;
    }
    std::vector<std::string> valid;
    for (const Json& instance : entry.value("valid", Json::array())) valid.push_back(instance.dump());
    int produced = 0;
    std::string text;
    for (int attempt = 0; produced < flags.samples && attempt < flags.samples * 20; ++attempt) {
      // Every other walk continues from a random prefix of a valid instance.
      std::string prefix;
      if (!valid.empty() && attempt % 2 == 1) {
        const std::string& instance = valid[random() % valid.size()];
        prefix = instance.substr(0, random() % (instance.size() + 1));
      }
      if (!Walk(*compiled, flags, prefix, random, &text)) continue;
      Json line = Json::object();
      line["name"] = name;
      line["text"] = text;
      std::cout << line.dump(-1, ' ', false, Json::error_handler_t::strict) << "\n";
      ++produced;
    }
    if (produced < flags.samples) std::cerr << name << ": only " << produced << " complete walks\n";
  }
  return failures == 0 ? 0 : 1;
}
