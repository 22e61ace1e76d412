// Fuzzes the grammar engine's front ends and its matcher. The first byte picks the front end (modulo 8,
// so the seeds start with a digit):
//   0 regex, full match            1 regex, search             2 regex, JSON string content, full match
//   3 GBNF                         4 JSON Schema, strict       5 JSON Schema, not strict
//   6 regex, JSON string content, search                      7 JSON Schema, not strict, whitespace up to 2
// The rest, up to the first NUL byte, is the pattern, grammar or schema; the bytes after the NUL steer the
// walk below (a PRNG seeded from the whole input takes over when they run out).
//
// A refusal must be INVALID_ARGUMENT with a message, from the front end or from CompileGrammar (small limits
// keep each input fast). A grammar that compiles is walked for up to 64 bytes, each chosen among
// AllowedNextBytes(), checking at every step that:
//   - the chosen byte is accepted and leaves the matcher alive (more bytes allowed, or it may end), and
//     IsTerminated() holds exactly when no byte is allowed;
//   - a byte outside AllowedNextBytes() is refused and changes nothing, and so is an allowed byte followed
//     by one that is not allowed after it (AcceptBytes is all or nothing);
//   - Rollback(1) restores the AllowedNextBytes() and CanEnd() from before the byte, and accepting the byte
//     again gives the same state;
//   - where the grammar may end, the text is valid JSON (JSON Schema), or a valid JSON string's content
//     (regex in JSON string mode).
// Then the walk is replayed over a small vocabulary (every single byte, some multi-byte tokens, a
// duplicate, an empty and a special token, an end token) in tokens and byte chunks, which must all be
// accepted; at a few positions FillMask's bit for every token must equal whether AcceptToken accepts
// it (rolled back after), twice in a row (the second from the grammar's mask cache), with no bit set past
// the vocabulary; the end token must terminate the matcher. The vocabulary is one for the process, so the
// terminal tables that grammars share by signature (token_masks.cc) carry over from input to input, as they
// do in a worker: a mask failure may need the inputs before it to show again.
#include <algorithm>
#include <bitset>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "nlohmann/json.hpp"
#include "worker/grammar/automaton.h"
#include "worker/grammar/gbnf_parser.h"
#include "worker/grammar/grammar.h"
#include "worker/grammar/json_schema_compiler.h"
#include "worker/grammar/matcher.h"
#include "worker/grammar/regex_compiler.h"
#include "worker/grammar/vocabulary.h"

namespace {

using llmc::grammar::CompiledGrammar;
using llmc::grammar::Grammar;
using llmc::grammar::GrammarMatcher;
using llmc::grammar::VocabularyIndex;

constexpr size_t kMaxInputBytes = 4096;
constexpr size_t kMaxWalkBytes = 64;
constexpr int kMaskChecks = 6;  // positions of the replay where the mask is checked, besides the start

enum class Mode { kRegexFull, kRegexSearch, kRegexJson, kGbnf, kSchemaStrict, kSchema, kRegexJsonSearch, kSchemaWs };

// What a complete text must be, beyond matching the grammar.
enum class Output { kAny, kJson, kJsonStringContent };

[[noreturn]] void Fail(const std::string& what) {
  std::cerr << what << "\n";
  std::abort();
}

std::string Printable(absl::string_view bytes) {
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  for (const char c : bytes) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte >= 0x20 && byte < 0x7F && byte != '\\') {
      out += c;
    } else {
      out += "\\x";
      out += kHex[byte >> 4];
      out += kHex[byte & 15];
    }
  }
  return out;
}

// The steering bytes first, then a PRNG (splitmix64) seeded from the whole input.
class Choices {
 public:
  Choices(absl::string_view steering, absl::string_view whole) : steering_(steering) {
    state_ = 0xcbf29ce484222325u;  // FNV-1a
    for (const char c : whole) state_ = (state_ ^ static_cast<unsigned char>(c)) * 0x100000001b3u;
  }

  uint64_t Next() {
    if (!steering_.empty()) {
      const auto byte = static_cast<unsigned char>(steering_.front());
      steering_.remove_prefix(1);
      return byte;
    }
    return Random();
  }
  uint64_t Random() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
  }
  size_t Below(size_t n) { return static_cast<size_t>(Random() % n); }

 private:
  absl::string_view steering_;
  uint64_t state_;
};

// The first byte from `start` on (wrapping) whose bit in `bits` is `set`, or -1.
int PickBit(const std::bitset<256>& bits, bool set, size_t start) {
  for (size_t i = 0; i < 256; ++i) {
    const size_t byte = (start + i) % 256;
    if (bits[byte] == set) return static_cast<int>(byte);
  }
  return -1;
}

// The `n`-th allowed byte, counting modulo how many there are (`bits` has one set at least).
int NthSetBit(const std::bitset<256>& bits, size_t n) {
  n %= bits.count();
  for (int byte = 0; byte < 256; ++byte) {
    if (bits[byte] && n-- == 0) return byte;
  }
  return -1;
}

void CheckRefusal(const absl::Status& status, absl::string_view stage) {
  if (status.code() != absl::StatusCode::kInvalidArgument || status.message().empty()) {
    Fail(std::string(stage) + " refused with other than INVALID_ARGUMENT and a message: " + status.ToString());
  }
}

void CheckOutput(Output output, const std::string& text) {
  if (output == Output::kAny) return;
  const std::string json = output == Output::kJson ? text : "\"" + text + "\"";
  try {
    const nlohmann::json parsed = nlohmann::json::parse(json);
    if (output == Output::kJsonStringContent && !parsed.is_string()) Fail("not a JSON string: " + Printable(json));
  } catch (const nlohmann::json::out_of_range&) {
    // A number too large for a double (1e999): valid JSON that nlohmann refuses.
  } catch (const nlohmann::json::exception& error) {
    Fail("a complete text is not valid " + std::string(output == Output::kJson ? "JSON" : "JSON string content") +
         ": " + Printable(json) + " (" + error.what() + ")");
  }
}

struct Snapshot {
  std::bitset<256> allowed;
  bool can_end;
  bool terminated;
  int32_t steps;
  bool operator==(const Snapshot& other) const {
    return allowed == other.allowed && can_end == other.can_end && terminated == other.terminated &&
           steps == other.steps;
  }
};

Snapshot Take(const GrammarMatcher& matcher) {
  return Snapshot{matcher.AllowedNextBytes(), matcher.CanEnd(), matcher.IsTerminated(), matcher.num_steps()};
}

void ExpectUnchanged(const GrammarMatcher& matcher, const Snapshot& before, const std::string& what,
                     const std::string& text) {
  if (!(Take(matcher) == before)) Fail(what + " changed the matcher, after " + Printable(text));
}

// The byte-level walk; returns the text walked.
std::string Walk(const std::shared_ptr<const CompiledGrammar>& compiled, Choices& choices, Output output) {
  GrammarMatcher matcher(compiled, nullptr);
  std::string text;
  if (matcher.CanEnd()) CheckOutput(output, text);
  while (text.size() < kMaxWalkBytes) {
    const Snapshot before = Take(matcher);
    if (before.terminated != before.allowed.none()) {
      Fail("IsTerminated() disagrees with AllowedNextBytes() after " + Printable(text));
    }
    if (before.allowed.none()) break;

    const int outside = PickBit(before.allowed, false, choices.Random());
    if (outside >= 0) {
      if (matcher.AcceptBytes(std::string(1, static_cast<char>(outside)))) {
        Fail("a byte outside AllowedNextBytes() was accepted after " + Printable(text));
      }
      ExpectUnchanged(matcher, before, "a refused byte", text);
    }

    const int byte = NthSetBit(before.allowed, choices.Next());
    const std::string chosen(1, static_cast<char>(byte));
    if (!matcher.AcceptBytes(chosen)) Fail("an allowed byte was refused after " + Printable(text));
    const Snapshot after = Take(matcher);
    if (after.steps != before.steps + 1) Fail("AcceptBytes did not count one step");
    if (after.allowed.none() && !after.can_end) Fail("an accepted byte left the matcher dead: " + Printable(text));

    matcher.Rollback(1);
    if (!(Take(matcher) == before)) Fail("Rollback(1) did not restore the state before " + Printable(text + chosen));
    const int after_outside = PickBit(after.allowed, false, choices.Random());
    if (after_outside >= 0) {
      if (matcher.AcceptBytes(chosen + static_cast<char>(after_outside))) {
        Fail("two bytes were accepted though the second is not allowed after " + Printable(text + chosen));
      }
      ExpectUnchanged(matcher, before, "a refused pair of bytes", text);
    }
    if (!matcher.AcceptBytes(chosen)) Fail("a byte accepted before was refused after a rollback");
    if (!(Take(matcher) == after)) Fail("accepting a byte again gave another state: " + Printable(text + chosen));

    text += chosen;
    if (after.can_end) CheckOutput(output, text);
  }
  return text;
}

struct Vocabulary {
  std::shared_ptr<const VocabularyIndex> index;
  std::vector<std::string> bytes;
  std::vector<int32_t> multi_byte;  // ids of tokens longer than a byte
  int32_t end = -1;
  int32_t special = -1;
};

// One vocabulary for the whole process, as a worker has: the terminal tables token_masks.cc shares across
// grammars by vocabulary and signature are then reused across inputs (and nothing new stays behind per input).
const Vocabulary& TheVocabulary() {
  static const Vocabulary* const vocabulary = [] {
    auto* vocab = new Vocabulary;
    for (int byte = 0; byte < 256; ++byte) vocab->bytes.emplace_back(1, static_cast<char>(byte));
    // Multi-byte tokens: words ("ab" twice: tokens with equal bytes), pieces of JSON, numbers, whitespace
    // runs and escapes, whole and partial UTF-8 characters.
    const char* const kWords[] = {"ab", "abc", "ab", "aaaa", "yes", "no", "the", "name", "id", "xyz", "a.b", "::="};
    const char* const kJson[] = {"{\"", "\":", "\":\"", "\",\"", "\"}", "\"},{\"", "},",   "}]",   "[{",
                                 "[]",  "{}",  "\": ",  ", ",    "a\"", "true",    "null", "false"};
    const char* const kNumbers[] = {"12", "123", "1,", "0.5", ".0", "-1", "-0", "e+", "E-", "00", "1e5"};
    const char* const kEscapes[] = {"\\n", "\\\"", "\\\\", "\\u00", "\\u0007", "\\/",
                                    "  ",  "\n  ", "\t\t", " \n",   "\r\n"};
    const char* const kUtf8[] = {"\xc3\xa9",         "\xe2\x82\xac", "\xf0\x9f\x8e\x89", "\xe6\x97\xa5\xe6\x9c\xac",
                                 "\xf4\x8f\xbf\xbf", "\xc3",         "\x82\xac",         "a\xc3"};
    const auto add = [vocab](const auto& tokens) {
      for (const char* token : tokens) {
        vocab->multi_byte.push_back(static_cast<int32_t>(vocab->bytes.size()));
        vocab->bytes.emplace_back(token);
      }
    };
    add(kWords);
    add(kJson);
    add(kNumbers);
    add(kEscapes);
    add(kUtf8);
    vocab->bytes.emplace_back();  // an empty token: never allowed
    vocab->special = static_cast<int32_t>(vocab->bytes.size());
    vocab->bytes.emplace_back("<|im_start|>");
    vocab->end = static_cast<int32_t>(vocab->bytes.size());
    vocab->bytes.emplace_back("</s>");
    std::vector<bool> special(vocab->bytes.size(), false);
    special[vocab->special] = true;
    special[vocab->end] = true;
    vocab->index = std::make_shared<const VocabularyIndex>(vocab->bytes, special, std::vector<int32_t>{vocab->end});
    return vocab;
  }();
  return *vocabulary;
}

void CheckMask(GrammarMatcher& matcher, const Vocabulary& vocab, absl::string_view prefix) {
  const size_t size = vocab.bytes.size();
  std::vector<uint64_t> mask((size + 63) / 64 + 1, ~uint64_t{0});
  matcher.FillMask(absl::MakeSpan(mask));
  std::vector<uint64_t> again(mask.size(), ~uint64_t{0});
  matcher.FillMask(absl::MakeSpan(again));
  if (again != mask) Fail("FillMask twice in a row differs (the mask cache) after " + Printable(prefix));
  for (size_t bit = size; bit < mask.size() * 64; ++bit) {
    if ((mask[bit / 64] >> (bit % 64)) & 1) Fail("FillMask set a bit past the vocabulary");
  }
  const Snapshot before = Take(matcher);
  for (size_t id = 0; id < size; ++id) {
    const bool bit = (mask[id / 64] >> (id % 64)) & 1;
    const bool accepted = matcher.AcceptToken(static_cast<int32_t>(id));
    if (bit != accepted) {
      Fail("FillMask says " + std::string(bit ? "allowed" : "not allowed") + " but AcceptToken " +
           (accepted ? "accepts" : "refuses") + " token " + std::to_string(id) + " '" + Printable(vocab.bytes[id]) +
           "' after " + Printable(prefix));
    }
    if (id < 256 && bit != before.allowed[id]) Fail("a single-byte token's bit disagrees with AllowedNextBytes()");
    if (!accepted) {
      if (matcher.num_steps() != before.steps) Fail("a refused token counted as a step");
      continue;
    }
    if (static_cast<int32_t>(id) == vocab.end) {
      if (!before.can_end) Fail("the end token was accepted where the grammar may not end");
      if (!matcher.IsTerminated() || matcher.CanEnd() || matcher.AllowedNextBytes().any()) {
        Fail("the end token did not terminate the matcher");
      }
      std::vector<uint64_t> ended(mask.size(), ~uint64_t{0});
      matcher.FillMask(absl::MakeSpan(ended));
      for (const uint64_t word : ended) {
        if (word != 0) Fail("FillMask allows tokens after the end token");
      }
      if (matcher.AcceptToken(0) || matcher.AcceptBytes("a") || matcher.AcceptToken(vocab.end)) {
        Fail("something was accepted after the end token");
      }
    }
    matcher.Rollback(1);
    if (matcher.num_steps() != before.steps) Fail("Rollback(1) after a token did not undo one step");
  }
  // Whole snapshots are costly next to a token: one for all the tokens, refused or rolled back.
  ExpectUnchanged(matcher, before, "trying every token", std::string(prefix));
}

// Replays the walk over the vocabulary, checking masks at the start, at the end and at a few positions.
void Replay(const std::shared_ptr<const CompiledGrammar>& compiled, const std::string& walk, Choices& choices) {
  const Vocabulary& vocab = TheVocabulary();
  GrammarMatcher matcher(compiled, vocab.index);
  const Snapshot start = Take(matcher);
  std::vector<bool> check_at(walk.size() + 1, false);
  check_at[0] = true;
  check_at[walk.size()] = true;
  for (int i = 0; i < kMaskChecks; ++i) check_at[choices.Below(walk.size() + 1)] = true;
  for (size_t at = 0;;) {
    if (check_at[at]) CheckMask(matcher, vocab, absl::string_view(walk).substr(0, at));
    if (at == walk.size()) break;
    const absl::string_view rest = absl::string_view(walk).substr(at);
    // The longest multi-byte token that starts the rest, else a chunk of 1 to 3 bytes (a token when 1).
    int32_t token = -1;
    for (const int32_t id : vocab.multi_byte) {
      const std::string& bytes = vocab.bytes[id];
      if (rest.substr(0, bytes.size()) == bytes && (token < 0 || bytes.size() > vocab.bytes[token].size())) {
        token = id;
      }
    }
    size_t length;
    bool accepted;
    if (token >= 0 && choices.Below(2) == 0) {
      length = vocab.bytes[token].size();
      accepted = matcher.AcceptToken(token);
    } else {
      length = std::min<size_t>(rest.size(), 1 + choices.Below(3));
      accepted = length == 1 ? matcher.AcceptToken(static_cast<unsigned char>(rest[0]))
                             : matcher.AcceptBytes(rest.substr(0, length));
    }
    if (!accepted) Fail("a piece of the walk was refused in the replay after " + Printable(walk.substr(0, at)));
    at += length;
  }
  matcher.Rollback(matcher.num_steps() + 5);  // more steps than there are: back to the start
  if (!(Take(matcher) == start)) Fail("rolling back everything did not return to the start");
}

void CheckGrammar(const Grammar& grammar, Choices& choices, Output output) {
  if (grammar.ToString().empty()) Fail("Grammar::ToString() is empty");
  llmc::grammar::CompileLimits limits;
  limits.max_states = 5000;
  limits.max_cache_bytes = size_t{4} << 20;
  absl::StatusOr<std::shared_ptr<const CompiledGrammar>> compiled = llmc::grammar::CompileGrammar(grammar, limits);
  if (!compiled.ok()) {
    CheckRefusal(compiled.status(), "CompileGrammar");
    return;
  }
  const std::string walk = Walk(*compiled, choices, output);
  Replay(*compiled, walk, choices);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1 || size > kMaxInputBytes) return 0;
  const absl::string_view input(reinterpret_cast<const char*>(data), size);
  const auto mode = static_cast<Mode>(data[0] % 8);
  const absl::string_view body = input.substr(1);
  const size_t split = body.find('\0');
  const absl::string_view text = body.substr(0, split);
  Choices choices(split == absl::string_view::npos ? absl::string_view() : body.substr(split + 1), input);

  switch (mode) {
    case Mode::kRegexFull:
    case Mode::kRegexSearch:
    case Mode::kRegexJson:
    case Mode::kRegexJsonSearch: {
      llmc::grammar::RegexOptions options;
      options.full_match = mode == Mode::kRegexFull || mode == Mode::kRegexJson;
      options.json_string_content = mode == Mode::kRegexJson || mode == Mode::kRegexJsonSearch;
      absl::StatusOr<llmc::grammar::Expr> expr = llmc::grammar::CompileRegex(text, options);
      if (!expr.ok()) {
        CheckRefusal(expr.status(), "CompileRegex");
        return 0;
      }
      Grammar grammar;
      grammar.root = grammar.AddRule("root", *std::move(expr));
      CheckGrammar(grammar, choices, options.json_string_content ? Output::kJsonStringContent : Output::kAny);
      return 0;
    }
    case Mode::kGbnf: {
      absl::StatusOr<Grammar> grammar = llmc::grammar::ParseGbnf(text);
      if (!grammar.ok()) {
        CheckRefusal(grammar.status(), "ParseGbnf");
        return 0;
      }
      CheckGrammar(*grammar, choices, Output::kAny);
      return 0;
    }
    case Mode::kSchemaStrict:
    case Mode::kSchema:
    case Mode::kSchemaWs: {
      const nlohmann::ordered_json schema =
          nlohmann::ordered_json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
      if (schema.is_discarded()) return 0;
      llmc::grammar::JsonSchemaOptions options;
      options.strict = mode == Mode::kSchemaStrict;
      options.max_whitespace = mode == Mode::kSchemaWs ? 2 : 0;
      absl::StatusOr<Grammar> grammar = llmc::grammar::CompileJsonSchema(schema, options);
      if (!grammar.ok()) {
        CheckRefusal(grammar.status(), "CompileJsonSchema");
        return 0;
      }
      CheckGrammar(*grammar, choices, Output::kJson);
      return 0;
    }
  }
  return 0;
}
