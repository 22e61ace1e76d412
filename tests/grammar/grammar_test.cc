// The grammar form, the automaton and the matcher: byte-level matching, rollback, and token masks checked
// against accepting every token one by one.
#include "worker/grammar/grammar.h"

#include <bitset>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "tests/support/catch.h"
#include "worker/grammar/automaton.h"
#include "worker/grammar/matcher.h"
#include "worker/grammar/regex_compiler.h"
#include "worker/grammar/token_masks.h"
#include "worker/grammar/vocabulary.h"

namespace llmc::grammar {
namespace {

using Kind = Expr::Kind;

std::shared_ptr<const CompiledGrammar> MustCompile(const Grammar& grammar) {
  absl::StatusOr<std::shared_ptr<const CompiledGrammar>> compiled = CompileGrammar(grammar);
  INFO(compiled.status().ToString());
  REQUIRE(compiled.ok());
  return *compiled;
}

bool Matches(const Grammar& grammar, const std::string& text) {
  absl::StatusOr<bool> matches = MatchesText(grammar, text);
  INFO(matches.status().ToString());
  REQUIRE(matches.ok());
  return *matches;
}

// value ::= object | array | string | "1"
// object ::= "{" ( string ":" value ( "," string ":" value )* )? "}"
// array  ::= "[" ( value ( "," value )* )? "]"
// string ::= "\"" [^"\\]* "\""
Grammar SmallJson() {
  Grammar grammar;
  const int32_t value = grammar.AddRule("value");
  const int32_t object = grammar.AddRule("object");
  const int32_t array = grammar.AddRule("array");
  const int32_t string = grammar.AddRule("string");
  grammar.rules[value].body =
      Expr::Choice({Expr::RuleRef(object), Expr::RuleRef(array), Expr::RuleRef(string), Expr::Literal("1")});
  const auto member = [&] { return Expr::Sequence({Expr::RuleRef(string), Expr::Literal(":"), Expr::RuleRef(value)}); };
  grammar.rules[object].body = Expr::Sequence(
      {Expr::Literal("{"),
       Expr::Optional(Expr::Sequence({member(), Expr::Star(Expr::Sequence({Expr::Literal(","), member()}))})),
       Expr::Literal("}")});
  grammar.rules[array].body = Expr::Sequence(
      {Expr::Literal("["),
       Expr::Optional(Expr::Sequence(
           {Expr::RuleRef(value), Expr::Star(Expr::Sequence({Expr::Literal(","), Expr::RuleRef(value)}))})),
       Expr::Literal("]")});
  grammar.rules[string].body = Expr::Sequence(
      {Expr::Literal("\""), Expr::Star(Expr::NegatedCharClass({{'"', '"'}, {'\\', '\\'}})), Expr::Literal("\"")});
  grammar.root = value;
  return grammar;
}

TEST_CASE("char classes normalize: sorted, merged, surrogates cut out", "[grammar][unit]") {
  const Expr expr = Expr::CharClass({{'c', 'f'}, {'a', 'b'}, {0xD000, 0xE000}});
  REQUIRE(expr.ranges.size() == 3);
  CHECK(expr.ranges[0] == CodePointRange{'a', 'f'});
  CHECK(expr.ranges[1] == CodePointRange{0xD000, 0xD7FF});
  CHECK(expr.ranges[2] == CodePointRange{0xE000, 0xE000});
  const Expr negated = Expr::NegatedCharClass({{0, 'a' - 1}, {'c', kMaxCodePoint}});
  REQUIRE(negated.ranges.size() == 1);
  CHECK(negated.ranges[0] == CodePointRange{'a', 'b'});
}

TEST_CASE("literals, classes and repetition match byte for byte", "[grammar][unit]") {
  Grammar grammar;
  grammar.AddRule("root", Expr::Sequence({Expr::Literal("id-"), Expr::Repeat(Expr::CharClass({{'0', '9'}}), 2, 4)}));
  CHECK(Matches(grammar, "id-12"));
  CHECK(Matches(grammar, "id-1234"));
  CHECK_FALSE(Matches(grammar, "id-1"));
  CHECK_FALSE(Matches(grammar, "id-12345"));
  CHECK_FALSE(Matches(grammar, "id-12a"));
  CHECK_FALSE(Matches(grammar, ""));
}

TEST_CASE("code point classes match every UTF-8 length and nothing invalid", "[grammar][unit]") {
  Grammar grammar;
  grammar.AddRule("root", Expr::Plus(Expr::NegatedCharClass({{'"', '"'}})));
  CHECK(Matches(grammar, "a\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80"));  // a é € 😀
  CHECK_FALSE(Matches(grammar, "a\"b"));
  CHECK_FALSE(Matches(grammar, "\xC3"));              // cut short
  CHECK_FALSE(Matches(grammar, "\xED\xA0\x80"));      // a surrogate
  CHECK_FALSE(Matches(grammar, "\xC0\xAF"));          // overlong
  CHECK_FALSE(Matches(grammar, "\xF4\x90\x80\x80"));  // beyond U+10FFFF
  Grammar narrow;
  narrow.AddRule("root", Expr::CharClass({{0x3B1, 0x3C9}}));  // Greek small letters
  CHECK(Matches(narrow, "\xCE\xB1"));
  CHECK(Matches(narrow, "\xCF\x89"));
  CHECK_FALSE(Matches(narrow, "\xCE\xB0"));
}

TEST_CASE("recursive rules nest and the root must complete", "[grammar][unit]") {
  const Grammar grammar = SmallJson();
  CHECK(Matches(grammar, R"({"a":[1,{"b":"c"},[]],"d":{}})"));
  CHECK(Matches(grammar, R"([[[[[[1]]]]]])"));
  CHECK_FALSE(Matches(grammar, R"({"a":[1,{"b":"c"},[]],"d":{})"));
  CHECK_FALSE(Matches(grammar, R"({"a"})"));
  CHECK_FALSE(Matches(grammar, R"([1,])"));
}

TEST_CASE("right recursion runs in constant stack depth", "[grammar][unit]") {
  Grammar grammar;
  const int32_t list = grammar.AddRule("list");
  grammar.rules[list].body = Expr::Choice({Expr::Sequence({Expr::Literal("x"), Expr::RuleRef(list)}), Expr::Empty()});
  GrammarMatcher matcher(MustCompile(grammar), nullptr);
  for (int i = 0; i < 5000; ++i) REQUIRE(matcher.AcceptBytes("x"));
  CHECK(matcher.CanEnd());
  CHECK_FALSE(matcher.AcceptBytes("y"));
}

TEST_CASE("left recursion and undefined rules are refused by name", "[grammar][unit]") {
  Grammar direct;
  const int32_t expr = direct.AddRule("expr");
  direct.rules[expr].body =
      Expr::Choice({Expr::Sequence({Expr::RuleRef(expr), Expr::Literal("+1")}), Expr::Literal("1")});
  absl::StatusOr<std::shared_ptr<const CompiledGrammar>> compiled = CompileGrammar(direct);
  REQUIRE_FALSE(compiled.ok());
  CHECK_THAT(std::string(compiled.status().message()), Catch::Contains("'expr' is left-recursive"));

  Grammar hidden;  // through a nullable rule
  const int32_t a = hidden.AddRule("a");
  const int32_t maybe = hidden.AddRule("maybe", Expr::Optional(Expr::Literal("m")));
  hidden.rules[a].body =
      Expr::Choice({Expr::Sequence({Expr::RuleRef(maybe), Expr::RuleRef(a), Expr::Literal("x")}), Expr::Literal("y")});
  compiled = CompileGrammar(hidden);
  REQUIRE_FALSE(compiled.ok());
  CHECK_THAT(std::string(compiled.status().message()), Catch::Contains("left-recursive"));

  Grammar undefined;
  undefined.AddRule("root", Expr::RuleRef(7));
  CHECK_FALSE(CompileGrammar(undefined).ok());
}

// The bytes AllowedNextBytes() lists, as a string (for messages), after checking that AcceptBytes takes each.
std::string AllowedAndAccepted(GrammarMatcher& matcher) {
  std::string allowed;
  const std::bitset<256> bytes = matcher.AllowedNextBytes();
  for (int b = 0; b < 256; ++b) {
    if (!bytes[b]) continue;
    allowed += static_cast<char>(b);
    INFO("byte " << b);
    REQUIRE(matcher.AcceptBytes(std::string(1, static_cast<char>(b))));
    matcher.Rollback(1);
  }
  return allowed;
}

// Found by fuzz/grammar_fuzzer.cc (a regex with an empty class after a character, "C[]", and a JSON Schema
// "pattern": "^-za[]+\\d?$"): a byte into a state that cannot complete its rule was allowed, then refused.
TEST_CASE("bytes that lead only into dead ends are not allowed", "[grammar][unit]") {
  Grammar dead_branch;  // "ab" [] | "ac" | "d"
  dead_branch.AddRule("root", Expr::Choice({Expr::Sequence({Expr::Literal("ab"), Expr::Nothing()}), Expr::Literal("ac"),
                                            Expr::Literal("d")}));
  GrammarMatcher matcher(MustCompile(dead_branch), nullptr);
  CHECK(AllowedAndAccepted(matcher) == "ad");
  REQUIRE(matcher.AcceptBytes("a"));
  CHECK(AllowedAndAccepted(matcher) == "c");
  CHECK_FALSE(matcher.AcceptBytes("b"));

  Grammar endless;  // root ::= "x" forever | "y";  forever ::= "a" forever  (never completes)
  const int32_t root = endless.AddRule("root");
  const int32_t forever = endless.AddRule("forever");
  endless.rules[forever].body = Expr::Sequence({Expr::Literal("a"), Expr::RuleRef(forever)});
  endless.rules[root].body =
      Expr::Choice({Expr::Sequence({Expr::Literal("x"), Expr::RuleRef(forever)}), Expr::Literal("y")});
  endless.root = root;
  GrammarMatcher endless_matcher(MustCompile(endless), nullptr);
  CHECK(AllowedAndAccepted(endless_matcher) == "y");

  Grammar nothing;  // matches no text at all
  nothing.AddRule("root", Expr::Sequence({Expr::Literal("a"), Expr::Nothing()}));
  GrammarMatcher nothing_matcher(MustCompile(nothing), nullptr);
  CHECK(nothing_matcher.AllowedNextBytes().none());
  CHECK_FALSE(nothing_matcher.CanEnd());
  CHECK(nothing_matcher.IsTerminated());
}

TEST_CASE("a grammar beyond the state limit is refused, not built", "[grammar][unit]") {
  Grammar grammar;
  grammar.AddRule("root", Expr::Repeat(Expr::NegatedCharClass({{'"', '"'}}), 0, 9000));
  CompileLimits limits;
  limits.max_states = 1000;
  absl::StatusOr<std::shared_ptr<const CompiledGrammar>> compiled = CompileGrammar(grammar, limits);
  REQUIRE_FALSE(compiled.ok());
  CHECK_THAT(std::string(compiled.status().message()), Catch::Contains("grammar too large"));
}

TEST_CASE("rollback returns to the earlier position exactly", "[grammar][unit]") {
  GrammarMatcher matcher(MustCompile(SmallJson()), nullptr);
  REQUIRE(matcher.AcceptBytes("{\"a\""));
  REQUIRE(matcher.AcceptBytes(":["));
  const std::bitset<256> before = matcher.AllowedNextBytes();
  REQUIRE(matcher.AcceptBytes("1]}"));
  CHECK(matcher.CanEnd());
  CHECK(matcher.IsTerminated());
  matcher.Rollback(1);
  CHECK(matcher.AllowedNextBytes() == before);
  CHECK_FALSE(matcher.CanEnd());
  CHECK(matcher.num_steps() == 2);
  matcher.Rollback(10);
  CHECK(matcher.num_steps() == 0);
  CHECK(matcher.AcceptBytes("[1]"));
}

// A vocabulary of every byte, plus multi-byte tokens that cross structure (quotes with punctuation,
// partial UTF-8), duplicates, a special token and an end token.
struct TestVocabulary {
  std::vector<std::string> bytes;
  std::vector<bool> special;
  int32_t end = 0;
  int32_t special_id = 0;
};

TestVocabulary MakeVocabulary() {
  TestVocabulary vocabulary;
  for (int b = 0; b < 256; ++b) vocabulary.bytes.push_back(std::string(1, static_cast<char>(b)));
  for (const char* piece :
       {"\"",     "\":", "\",", "\"}", "\"]", "\"},",   "{\"",  "[\"",    "[[",   "]]",       "}}",
        "},{\"",  "1,",  "1]",  "11",  "ab",  "abc",    "a\"",  "a\",\"", ",\"",  "\xC3\xA9", "\xC3",
        "\xA9\"", "[1",  "{}",  "[]",  "abc", "\":{\"", "\":[", "\":\"",  "\":1", "1}",       "x\\y"}) {
    vocabulary.bytes.push_back(piece);
  }
  vocabulary.special.assign(vocabulary.bytes.size() + 2, false);
  vocabulary.end = static_cast<int32_t>(vocabulary.bytes.size());
  vocabulary.bytes.push_back("</s>");
  vocabulary.special[vocabulary.end] = true;
  vocabulary.special_id = static_cast<int32_t>(vocabulary.bytes.size());
  vocabulary.bytes.push_back("<|tool|>");
  vocabulary.special[vocabulary.special_id] = true;
  return vocabulary;
}

TEST_CASE("the vocabulary trie lists every ordinary token once, in depth-first order", "[grammar][unit]") {
  const TestVocabulary test = MakeVocabulary();
  const VocabularyIndex index(test.bytes, test.special, {test.end});
  std::vector<int32_t> seen = index.tokens();
  std::sort(seen.begin(), seen.end());
  CHECK(seen.size() == test.bytes.size() - 2);  // all but </s> and <|tool|>, duplicates ("abc") included
  CHECK(std::adjacent_find(seen.begin(), seen.end()) == seen.end());
  CHECK_FALSE(index.IsIndexed(test.special_id));
  CHECK_FALSE(index.IsIndexed(test.end));
  CHECK(index.IsEndToken(test.end));
  // Every node's tokens spell the path to it.
  const auto& nodes = index.nodes();
  std::string path;  // depth-first order: a node's parent path is the path cut to its depth minus one
  for (size_t i = 1; i < nodes.size(); ++i) {
    path.resize(nodes[i].depth - 1);
    path.push_back(static_cast<char>(nodes[i].byte));
    const std::string& prefix = path;
    for (uint32_t k = nodes[i].tokens_begin; k < nodes[i].tokens_end; ++k) {
      CHECK(index.TokenBytes(index.tokens()[k]) == prefix);
    }
    CHECK(nodes[i].subtree_end > i);
    CHECK(nodes[i].subtree_end <= nodes.size());
  }
}

// The mask must equal, token by token, what AcceptToken accepts.
void CheckMaskAgainstAcceptance(GrammarMatcher& matcher, const VocabularyIndex& index, size_t width) {
  std::vector<uint64_t> mask(MaskWords(width) + 1, ~uint64_t{0});
  matcher.FillMask(absl::MakeSpan(mask));
  for (size_t token = 0; token < mask.size() * 64; ++token) {
    const bool allowed = (mask[token >> 6] >> (token & 63)) & 1;
    if (token >= index.vocab_size()) {
      REQUIRE_FALSE(allowed);
      continue;
    }
    const bool accepted = matcher.AcceptToken(static_cast<int32_t>(token));
    if (accepted) matcher.Rollback(1);
    INFO("token " << token << " '" << index.TokenBytes(static_cast<int32_t>(token)) << "'");
    REQUIRE(allowed == accepted);
  }
}

TEST_CASE("token masks equal token-by-token acceptance along random walks", "[grammar][unit]") {
  const TestVocabulary test = MakeVocabulary();
  auto index = std::make_shared<const VocabularyIndex>(test.bytes, test.special, std::vector<int32_t>{test.end});
  const std::shared_ptr<const CompiledGrammar> compiled = MustCompile(SmallJson());
  std::mt19937 rng(7);
  for (int walk = 0; walk < 40; ++walk) {
    GrammarMatcher matcher(compiled, index);
    for (int step = 0; step < 30 && !matcher.IsTerminated(); ++step) {
      CheckMaskAgainstAcceptance(matcher, *index, index->vocab_size());
      std::vector<uint64_t> mask(MaskWords(index->vocab_size()));
      matcher.FillMask(absl::MakeSpan(mask));
      std::vector<int32_t> allowed;
      for (size_t t = 0; t < index->vocab_size(); ++t) {
        if ((mask[t >> 6] >> (t & 63)) & 1) allowed.push_back(static_cast<int32_t>(t));
      }
      REQUIRE_FALSE(allowed.empty());
      const int32_t token = allowed[std::uniform_int_distribution<size_t>(0, allowed.size() - 1)(rng)];
      REQUIRE(matcher.AcceptToken(token));
      if (index->IsEndToken(token)) {
        CHECK(matcher.IsTerminated());
        break;
      }
    }
  }
}

TEST_CASE("end tokens only where the grammar may end, special tokens never", "[grammar][unit]") {
  const TestVocabulary test = MakeVocabulary();
  auto index = std::make_shared<const VocabularyIndex>(test.bytes, test.special, std::vector<int32_t>{test.end});
  GrammarMatcher matcher(MustCompile(SmallJson()), index);
  CHECK_FALSE(matcher.AcceptToken(test.end));
  CHECK_FALSE(matcher.AcceptToken(test.special_id));
  REQUIRE(matcher.AcceptBytes("[1"));
  CHECK_FALSE(matcher.AcceptToken(test.end));
  REQUIRE(matcher.AcceptBytes("]"));
  std::vector<uint64_t> mask(MaskWords(index->vocab_size()));
  matcher.FillMask(absl::MakeSpan(mask));
  CHECK(((mask[test.end >> 6] >> (test.end & 63)) & 1) == 1);
  CHECK(matcher.AcceptToken(test.end));
  CHECK(matcher.IsTerminated());
  matcher.FillMask(absl::MakeSpan(mask));
  CHECK(std::all_of(mask.begin(), mask.end(), [](uint64_t word) { return word == 0; }));
  matcher.Rollback(1);
  CHECK(matcher.CanEnd());
}

}  // namespace
}  // namespace llmc::grammar

namespace llmc::grammar {
namespace {

// Found in review: repetitions of nullable or varying-length bodies made each deterministic state stand for
// thousands of Thompson states, and determinizing ran out of memory. They are refused by size instead.
TEST_CASE("automata whose states stand for too many Thompson states are refused, not built", "[grammar][unit]") {
  for (const char* pattern : {"((a?){200}){100}", "(a|aa){0,10000}"}) {
    RegexOptions options;
    absl::StatusOr<Expr> expr = CompileRegex(pattern, options);
    REQUIRE(expr.ok());
    Grammar grammar;
    grammar.AddRule("root", *std::move(expr));
    absl::StatusOr<std::shared_ptr<const CompiledGrammar>> compiled = CompileGrammar(grammar);
    INFO(pattern);
    REQUIRE_FALSE(compiled.ok());
    CHECK_THAT(std::string(compiled.status().message()), Catch::Contains("grammar too large"));
  }
}

// Found in review: two rules that start alike and return to different states doubled the set of stacks with
// every byte. Past the bounds the matcher stops that branch (no answer can go on there) instead of stalling.
TEST_CASE("an ambiguous grammar's stacks stay bounded", "[grammar][unit]") {
  // a ::= "[" (a | b)? "]"   b ::= "[" (b | a)? "]"   root ::= a
  Grammar grammar;
  const int32_t a = grammar.AddRule("a");
  const int32_t b = grammar.AddRule("b");
  grammar.rules[a].body = Expr::Sequence(
      {Expr::Literal("["), Expr::Optional(Expr::Choice({Expr::RuleRef(a), Expr::RuleRef(b)})), Expr::Literal("]")});
  grammar.rules[b].body = Expr::Sequence(
      {Expr::Literal("["), Expr::Optional(Expr::Choice({Expr::RuleRef(b), Expr::RuleRef(a)})), Expr::Literal("]")});
  grammar.root = a;
  GrammarMatcher matcher(MustCompile(grammar), nullptr);
  int depth = 0;
  while (depth < 200 && matcher.AcceptBytes("[")) ++depth;
  CHECK(matcher.Overflowed());
  CHECK(depth >= 6);  // a few levels are followed exactly before the bound
  CHECK(depth < 200);
}

// Found in review: a chain of thousands of rules, each naming the next, made the passes that copy small rules
// into their callers recurse once per rule.
TEST_CASE("a long chain of rules compiles without deep recursion", "[grammar][unit]") {
  const auto chain = [](int rules) {
    Grammar grammar;
    for (int i = 0; i < rules; ++i) grammar.AddRule("r" + std::to_string(i));
    for (int i = 0; i + 1 < rules; ++i) grammar.rules[i].body = Expr::RuleRef(i + 1);
    grammar.rules[rules - 1].body = Expr::Literal("x");
    return grammar;
  };
  GrammarMatcher short_chain(MustCompile(chain(2000)), nullptr);
  CHECK(short_chain.AcceptBytes("x"));
  CHECK(short_chain.CanEnd());
  // 20,000 calls before the first byte pass the closure's bound: the matcher stops there rather than follow.
  GrammarMatcher long_chain(MustCompile(chain(20000)), nullptr);
  CHECK(long_chain.Overflowed());
  CHECK_FALSE(long_chain.AcceptBytes("x"));
}

}  // namespace
}  // namespace llmc::grammar
