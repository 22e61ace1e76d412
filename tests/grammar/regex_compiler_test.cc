// The regular-expression compiler (worker/grammar/regex_compiler.h), judged by what its grammar accepts:
// each construct, full-match and search semantics, JSON string content, refusals, and realistic patterns
// whose expectations agree with Python's re.fullmatch (ECMAScript where the two differ).
#include "worker/grammar/regex_compiler.h"

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "tests/support/catch.h"
#include "worker/grammar/grammar.h"
#include "worker/grammar/matcher.h"

namespace llmc::grammar {
namespace {

struct Case {
  const char* pattern;
  std::string text;
  bool matches;
};

RegexOptions Search() {
  RegexOptions options;
  options.full_match = false;
  return options;
}

RegexOptions JsonContent(bool full_match = true) {
  RegexOptions options;
  options.full_match = full_match;
  options.json_string_content = true;
  return options;
}

Expr Compile(const std::string& pattern, const RegexOptions& options = {}) {
  absl::StatusOr<Expr> expr = CompileRegex(pattern, options);
  INFO("pattern: " << pattern);
  REQUIRE(expr.ok());
  return *std::move(expr);
}

bool Matches(const std::string& pattern, const std::string& text, const RegexOptions& options = {}) {
  Grammar grammar;
  grammar.root = grammar.AddRule("root", Compile(pattern, options));
  absl::StatusOr<bool> matched = MatchesText(grammar, text);
  INFO("pattern: " << pattern << "  text: " << text << "  grammar: " << grammar.ToString());
  REQUIRE(matched.ok());
  return *matched;
}

void CheckCases(const std::vector<Case>& cases, const RegexOptions& options = {}) {
  for (const Case& c : cases) {
    INFO("pattern: " << c.pattern << "  text: " << c.text << "  expected: " << c.matches);
    CHECK(Matches(c.pattern, c.text, options) == c.matches);
  }
}

// The INVALID_ARGUMENT message for `pattern`.
std::string Refusal(const std::string& pattern) {
  absl::StatusOr<Expr> expr = CompileRegex(pattern, {});
  INFO("pattern: " << pattern);
  REQUIRE_FALSE(expr.ok());
  CHECK(expr.status().code() == absl::StatusCode::kInvalidArgument);
  return std::string(expr.status().message());
}

size_t NodeCount(const Expr& expr) {
  size_t count = 1;
  for (const Expr& child : expr.children) count += NodeCount(child);
  return count;
}

TEST_CASE("regex literals, including multi-byte UTF-8 characters", "[grammar][regex]") {
  CheckCases({
      {"abc", "abc", true},
      {"abc", "ab", false},
      {"abc", "abcd", false},
      {"abc", "", false},
      {"", "", true},
      {"", "a", false},
      {"héllo", "héllo", true},
      {"héllo", "hello", false},
      {"日本語", "日本語", true},
      {"é+", "ééé", true},
      {"é+", "é\xA9", false},
      {"😀{2}", "😀😀", true},
      {"a]b}c", "a]b}c", true},
      {"x{,5}", "x{,5}", true},  // ECMAScript: not a quantifier, so the characters themselves
      {"a{", "a{", true},
      {"a{1,2", "a{1,2", true},
      {"a{b}", "a{b}", true},
  });
}

TEST_CASE("regex escapes", "[grammar][regex]") {
  CheckCases({
      {R"(\n)", "\n", true},
      {R"(\t)", "\t", true},
      {R"(\r)", "\r", true},
      {R"(\f)", "\f", true},
      {R"(\v)", "\v", true},
      {R"(\0)", std::string(1, '\0'), true},
      {R"(\x41\x7a)", "Az", true},
      {R"(\u00e9)", "é", true},
      {R"(\u00E9)", "é", true},
      {R"(\u{1F600})", "😀", true},
      {R"(\uD83D\uDE00)", "😀", true},
      {R"(\x{e9})", "é", true},
      {R"(\cJ)", "\n", true},
      {R"(\/)", "/", true},
      {R"(a\.b)", "a.b", true},
      {R"(a\.b)", "axb", false},
      {R"(\*\+\?\(\)\[\]\{\}\|\^\$\\\-)", R"(*+?()[]{}|^$\-)", true},
      {R"(\é)", "é", true},
  });
}

TEST_CASE("regex dot is any code point but a newline", "[grammar][regex]") {
  CheckCases({
      {"a.c", "abc", true},
      {"a.c", "a c", true},
      {"a.c", "aéc", true},
      {"a.c", "a😀c", true},
      {"a.c", "a\nc", false},
      {"a.c", "ac", false},
      {"..", "é", false},  // one character, two bytes
      {".", "\r", true},
  });
}

TEST_CASE("regex character classes", "[grammar][regex]") {
  CheckCases({
      {"[abc]+", "cab", true},
      {"[abc]", "d", false},
      {"[a-z]+", "hello", true},
      {"[a-z]", "A", false},
      {"[A-Za-z0-9_]+", "Snake_Case9", true},
      {"[^0-9]", "a", true},
      {"[^0-9]", "5", false},
      {"[^0-9]", "\n", true},
      {"[^a]", "😀", true},
      {"[é-ë]", "ê", true},
      {"[é-ë]", "e", false},
      {R"([a\-z])", "-", true},
      {R"([a\-z])", "b", false},
      {"[-a]", "-", true},
      {"[a-]", "-", true},
      {R"([\]])", "]", true},
      {R"([\\])", "\\", true},
      {"[.]", ".", true},
      {"[.]", "a", false},
      {"[$^|()*+?{]+", "$^|()*+?{", true},
      {"[[]", "[", true},
      {R"([\d.]+)", "3.14", true},
      {R"([\w-]+)", "kebab-case_1", true},
      {R"([a-\d])", "-", true},  // ECMAScript (Annex B): a, '-' and the digits
      {R"([a-\d])", "7", true},
      {R"([a-\d])", "b", false},
      {R"([\b])", "\b", true},
      {R"([\x41-\x43])", "B", true},
      {R"([\x41-\x43])", "D", false},
      {R"([\u4e00-\u9fff]+)", "中文", true},
      {R"([^\s])", " ", false},
      {R"([^\s])", "x", true},
      {R"([^\d\s])", "x", true},
      {R"([^\d\s])", "1", false},
      {"[]", "", false},  // ECMAScript: the empty class matches nothing
      {"[]", "a", false},
      {"[^]", "a", true},  // and its negation anything
      {"[^]", "\n", true},
  });
}

TEST_CASE("regex class escapes for digits, word and space characters and their negations", "[grammar][regex]") {
  CheckCases({
      {R"(\d+)", "0123456789", true},
      {R"(\d)", "\xD9\xA3", false},  // ARABIC-INDIC DIGIT THREE: \d is ASCII
      {R"(\d)", "a", false},
      {R"(\D)", "a", true},
      {R"(\D)", "5", false},
      {R"(\w+)", "abc_XYZ_019", true},
      {R"(\w)", "é", false},
      {R"(\w)", "-", false},
      {R"(\W)", "-", true},
      {R"(\W)", "é", true},
      {R"(\W)", "a", false},
      {R"(\s)", " ", true},
      {R"(\s)", "\t", true},
      {R"(\s)", "\n", true},
      {R"(\s)", "\v", true},
      {R"(\s)", "\xC2\xA0", true},      // NO-BREAK SPACE
      {R"(\s)", "\xE3\x80\x80", true},  // IDEOGRAPHIC SPACE
      {R"(\s)", "\xEF\xBB\xBF", true},  // BOM, whitespace in ECMAScript
      {R"(\s)", "\xE2\x80\xA8", true},  // LINE SEPARATOR
      {R"(\s)", "a", false},
      {R"(\S)", "é", true},
      {R"(\S)", " ", false},
  });
}

TEST_CASE("regex groups and alternation", "[grammar][regex]") {
  CheckCases({
      {"(ab)+", "abab", true},
      {"(ab)+", "aba", false},
      {"(?:ab|cd)*e", "abcdabe", true},
      {"(?:ab|cd)*e", "e", true},
      {"(?:ab|cd)*e", "ace", false},
      {R"((?<year>\d{4})-(?P<month>\d{2}))", "2024-05", true},
      {R"((?<year>\d{4})-(?P<month>\d{2}))", "2024-5", false},
      {"((a|b)c)?d", "bcd", true},
      {"((a|b)c)?d", "d", true},
      {"((a|b)c)?d", "cd", false},
      {"()a", "a", true},
      {"cat|dog", "dog", true},
      {"cat|dog", "cad", false},
      {"a|", "", true},
      {"a|", "a", true},
      {"|b", "b", true},
      {"a(|b)c", "ac", true},
      {"a(|b)c", "abc", true},
      {"(a*)*b", "aab", true},
      {"(a|)+b", "b", true},
  });
}

TEST_CASE("regex quantifiers, greedy, lazy and possessive", "[grammar][regex]") {
  CheckCases({
      {"ab?c", "ac", true},      {"ab?c", "abc", true},      {"ab?c", "abbc", false}, {"ab*c", "ac", true},
      {"ab*c", "abbbbc", true},  {"ab+c", "ac", false},      {"ab+c", "abbc", true},  {"a{3}", "aaa", true},
      {"a{3}", "aa", false},     {"a{3}", "aaaa", false},    {"a{2,}", "a", false},   {"a{2,}", "aaaaaaa", true},
      {"a{2,4}", "aaaa", true},  {"a{2,4}", "aaaaa", false}, {"a{0}b", "b", true},    {"a{0,0}b", "ab", false},
      {"(ab){2}", "abab", true}, {"a*?b", "aab", true},      {"a+?", "aaa", true},    {"a??b", "b", true},
      {"a{2,3}?", "aaa", true},  {"a{2,3}?", "a", false},    {"a*+b", "aab", true},   {"a++", "aa", true},
      {"a?+b", "ab", true},      {"a{2}+", "aa", true},
  });
  CHECK(CompileRegex("a{10000}", {}).ok());
  CHECK(CompileRegex("a{0,10000}", {}).ok());
}

TEST_CASE("regex anchors at the ends under full match", "[grammar][regex]") {
  CheckCases({
      {"^abc$", "abc", true},
      {"^abc$", "xabc", false},
      {"^abc", "abc", true},
      {"abc$", "abc", true},
      {"^a|b$", "a", true},
      {"^a|b$", "b", true},
      {"^a|b$", "ab", false},
      {"^$", "", true},
      {"^^a$$", "a", true},
  });
}

TEST_CASE("regex search semantics (JSON Schema pattern) match anywhere unless anchored", "[grammar][regex]") {
  CheckCases(
      {
          {"abc", "abc", true},
          {"abc", "xxabcyy", true},
          {"abc", "x\nabc\ny", true},
          {"abc", "ab", false},
          {"abc", "axbxc", false},
          {"^abc", "abcxx", true},
          {"^abc", "xabc", false},
          {"abc$", "xxabc", true},
          {"abc$", "abcx", false},
          {"^abc$", "abc", true},
          {"^abc$", "abcabc", false},
          {"", "", true},
          {"", "anything at all", true},
          {"^$", "", true},
          {"^$", "a", false},
          {"^a|b$", "axx", true},
          {"^a|b$", "xxb", true},
          {"^a|b$", "xax", false},
          {R"(\d{3})", "abc123def", true},
          {R"(\d{3})", "12a", false},
          {"^[a-z]+", "abc123", true},
          {"^[a-z]+", "1abc", false},
          {"é", "café au lait", true},
      },
      Search());
}

TEST_CASE("regex over JSON string content produces the encoded characters", "[grammar][regex]") {
  CheckCases(
      {
          {R"(a"b)", R"(a\"b)", true},
          {R"(a"b)", R"(a"b)", false},
          {R"(a\\b)", R"(a\\b)", true},  // the pattern's one backslash, escaped in JSON
          {R"(a\\b)", R"(a\b)", false},
          {R"(a\nb)", R"(a\nb)", true},  // a newline, written \n in JSON
          {R"(a\nb)", "a\nb", false},
          {R"(\t\r\f\x08)", R"(\t\r\f\b)", true},
          {R"(\x01)", R"(\u0001)", true},
          {R"(\x1f)", R"(\u001f)", true},
          {R"(\x1f)", R"(\u001F)", false},  // one canonical form per character
          {R"(\x0a)", R"(\u000a)", false},
          {"/", "/", true},
          {"/", R"(\/)", false},
          {"é😀", "é😀", true},
          {"\x7f", "\x7f", true},
          {R"("[^"]*")", R"(\"quoted\")", true},
          {R"("[^"]*")", R"(\"a\"b\")", false},
          {R"([a"])", R"(\")", true},
          {R"([a"])", "a", true},
          {R"([a"])", R"(")", false},
          {R"([^a])", R"(\")", true},
          {R"([^a])", R"(\\)", true},
          {R"([^a])", R"(\n)", true},
          {R"([^a])", R"(\b)", true},
          {R"([^a])", R"(\u0000)", true},
          {R"([^a])", R"(\u001e)", true},
          {R"([^a])", R"(\u0008)", false},
          {R"([^a])", R"(\u000b)", true},
          {R"([^a])", "\n", false},
          {R"([^a])", R"(")", false},
          {R"([^a])", "/", true},
          {R"([^a])", "a", false},
          {R"([\x00-\x1f]+)", R"(\u0000\n\t\u001f)", true},
          {".", R"(\t)", true},
          {".", R"(\n)", false},  // the dot excludes the newline
          {".", R"(\")", true},
          {R"(\s+)", R"( \t\n\r\f\u000b)", true},
          {R"(\w+)", "abc", true},
          {R"([\\"]{2})", R"(\\\")", true},
      },
      JsonContent());
}

TEST_CASE("regex search over JSON string content allows any encoded content around", "[grammar][regex]") {
  CheckCases(
      {
          {"b", R"(a\"b\n)", true},
          {"b", "a\"b", false},  // a raw quote cannot stand in the content
          {"b", "a\nb", false},
          {"^b", R"(b\\ \u0001)", true},
          {"^b", R"(\"b)", false},
          {"b$", R"(\tb)", true},
          {"", R"(\"\\\/)", false},  // \/ is not the canonical form of /
          {"", R"(\"\\/)", true},
      },
      JsonContent(/*full_match=*/false));
}

TEST_CASE("regex expressions stay small", "[grammar][regex]") {
  const Expr cls = Compile("[a-z0-9]");
  REQUIRE(cls.kind == Expr::Kind::kCharClass);
  CHECK(cls.ranges == std::vector<CodePointRange>{{'0', '9'}, {'a', 'z'}});

  const Expr literal = Compile(R"(ab\.c)");
  REQUIRE(literal.kind == Expr::Kind::kLiteral);
  CHECK(literal.literal == "ab.c");

  const Expr repeat = Compile(R"(\d{3})");
  REQUIRE(repeat.kind == Expr::Kind::kRepeat);
  CHECK(repeat.min == 3);
  CHECK(repeat.max == 3);
  CHECK(repeat.children.front().kind == Expr::Kind::kCharClass);

  const Expr negated = Compile("[^a]");
  REQUIRE(negated.kind == Expr::Kind::kCharClass);
  CHECK(negated.ranges.size() == 3);  // below a, above a up to the surrogates, after them

  // In JSON content a class with " is its other characters plus the escaped quote.
  const Expr quote = Compile(R"([a"])", JsonContent());
  REQUIRE(quote.kind == Expr::Kind::kChoice);
  REQUIRE(quote.children.size() == 2);
  CHECK(quote.children[0].kind == Expr::Kind::kCharClass);
  CHECK(quote.children[1].kind == Expr::Kind::kLiteral);
  CHECK(quote.children[1].literal == R"(\")");

  // Every escaped form of a negated class shares its prefixes.
  CHECK(NodeCount(Compile("[^a]", JsonContent())) <= 16);
  CHECK(NodeCount(Compile(".*", JsonContent(/*full_match=*/false))) <= 60);
}

TEST_CASE("regex long bounded repetitions stay within the automaton's limits", "[grammar][regex]") {
  CHECK(Matches("^[A-Za-z0-9]{1,255}$", std::string(255, 'x')));
  CHECK_FALSE(Matches("^[A-Za-z0-9]{1,255}$", std::string(256, 'x')));
  CHECK(Matches("^.{0,1000}$", std::string(1000, 'a'), JsonContent(/*full_match=*/false)));
  CHECK_FALSE(Matches("^.{0,1000}$", std::string(1001, 'a'), JsonContent(/*full_match=*/false)));
  CHECK(Matches(R"(\d{5})", "zip: 12345, thanks", Search()));
  CHECK_FALSE(Matches(R"(\d{5})", "zip: 1234, thanks", Search()));
}

TEST_CASE("regex refuses constructs a grammar cannot express, naming them", "[grammar][regex]") {
  const std::vector<std::pair<std::string, std::string>> refusals = {
      {"(?=a)b", "lookahead"},
      {"a(?!b)", "lookahead"},
      {"(?<=a)b", "lookbehind"},
      {"(?<!a)b", "lookbehind"},
      {R"((a)\1)", "backreference"},
      {R"((?<n>a)\k<n>)", "backreference"},
      {"(?P<n>a)(?P=n)", "backreference"},
      {R"(\bword\b)", "word boundary \\b"},
      {R"(a\Bb)", "word boundary \\B"},
      {"a^b", "anchor ^"},
      {"a$b", "anchor $"},
      {"(^a)", "anchor ^"},
      {"(a$)", "anchor $"},
      {"a$|b$c", "anchor $"},
      {R"(\Aabc)", "anchor \\A"},
      {R"(abc\z)", "anchor \\z"},
      {R"(\p{L}+)", "Unicode property"},
      {R"([\P{Lu}])", "Unicode property"},
      {"(?i)abc", "inline flags (?i)"},
      {"(?i:abc)", "inline flags (?i)"},
      {"(?-i:abc)", "inline flags"},
      {"a{10001}", "10000"},
      {"a{1,20000}", "quantifier bound 20000"},
      {"a{99999999999999999999}", "10000"},
      {"a{3,2}", "out of order"},
      {"[z-a]", "out of order"},
      {"*a", "nothing to repeat"},
      {"a**", "nothing to repeat"},
      {"a{2}{3}", "nothing to repeat"},
      {"^*", "nothing to repeat"},
      {"(ab", "missing )"},
      {"ab)", "unmatched )"},
      {"[ab", "missing ]"},
      {"ab\\", "lone \\"},
      {R"(\x4)", "malformed"},
      {R"(\u12)", "malformed"},
      {R"(\u{110000})", "malformed"},
      {R"(\uD800)", "surrogate"},
      {"(?>a)", "atomic group"},
      {"(?#comment)", "group syntax"},
      {"[[:alpha:]]", "POSIX class [:alpha:]"},
      {R"(\h)", "escape \\h"},
      {R"(\012)", "octal"},
      {"\xFF"
       "abc",
       "UTF-8"},
      {"(?<1a>x)", "group name"},
      {std::string(1000, '(') + std::string(1000, ')'), "nest"},
  };
  for (const auto& [pattern, construct] : refusals) {
    INFO("pattern: " << pattern);
    CHECK_THAT(Refusal(pattern), Catch::Contains(construct));
  }
}

TEST_CASE("regex realistic patterns", "[grammar][regex]") {
  const char* const kCode = R"(^[A-Z]{3}-\d{4}$)";
  const char* const kEmail = R"(^[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}$)";
  const char* const kPhone = R"(^\+?1?[-. ]?\(?\d{3}\)?[-. ]?\d{3}[-. ]?\d{4}$)";
  const char* const kDate = R"(^\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])$)";
  const char* const kTime = R"(^([01]\d|2[0-3]):[0-5]\d(:[0-5]\d)?$)";
  const char* const kIpv4 = R"(^((25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.){3}(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)$)";
  const char* const kUuid = R"(^[0-9a-f]{8}-[0-9a-f]{4}-[1-5][0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$)";
  const char* const kColor = R"(^#([0-9a-fA-F]{3}|[0-9a-fA-F]{6})$)";
  const char* const kSemver = R"(^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-[0-9A-Za-z.-]+)?$)";
  const char* const kZip = R"(^\d{5}(-\d{4})?$)";
  const char* const kSlug = R"(^[a-z0-9]+(?:-[a-z0-9]+)*$)";
  const char* const kMoney = R"(^\$\d{1,3}(,\d{3})*(\.\d{2})?$)";
  const char* const kDecimal = R"(^-?\d+(\.\d+)?$)";
  const char* const kName = R"(^[A-ZÀ-Ý][a-zà-ÿ]+(?: [A-ZÀ-Ý][a-zà-ÿ]+)*$)";
  const char* const kChoice = R"((yes|no|maybe))";
  const char* const kSimpleEmail = R"(\w+@\w+\.com)";
  CheckCases({
      {kCode, "ABC-1234", true},
      {kCode, "AB-1234", false},
      {kCode, "abc-1234", false},
      {kCode, "ABC-12345", false},
      {kEmail, "john.doe@example.com", true},
      {kEmail, "a+tag@sub.example.co", true},
      {kEmail, "john@example", false},
      {kEmail, "@example.com", false},
      {kEmail, "john doe@example.com", false},
      {kPhone, "(555) 123-4567", true},
      {kPhone, "+1 555.123.4567", true},
      {kPhone, "5551234567", true},
      {kPhone, "555-1234", false},
      {kPhone, "(555) 123-45678", false},
      {kDate, "2024-02-29", true},
      {kDate, "1999-12-31", true},
      {kDate, "2024-13-01", false},
      {kDate, "2024-1-01", false},
      {kDate, "2024-12-32", false},
      {kTime, "23:59", true},
      {kTime, "00:00:00", true},
      {kTime, "24:00", false},
      {kTime, "12:60", false},
      {kIpv4, "192.168.0.1", true},
      {kIpv4, "255.255.255.255", true},
      {kIpv4, "256.1.1.1", false},
      {kIpv4, "1.2.3", false},
      {kIpv4, "01.2.3.4", false},
      {kUuid, "123e4567-e89b-12d3-a456-426614174000", true},
      {kUuid, "123e4567-e89b-62d3-a456-426614174000", false},
      {kUuid, "123E4567-E89B-12D3-A456-426614174000", false},
      {kColor, "#fff", true},
      {kColor, "#A1B2C3", true},
      {kColor, "#abcd", false},
      {kColor, "fff", false},
      {kSemver, "1.2.3", true},
      {kSemver, "10.0.0-rc.1", true},
      {kSemver, "1.02.3", false},
      {kSemver, "1.2", false},
      {kZip, "12345", true},
      {kZip, "12345-6789", true},
      {kZip, "1234", false},
      {kZip, "12345-678", false},
      {kSlug, "my-post-1", true},
      {kSlug, "-bad", false},
      {kSlug, "bad-", false},
      {kSlug, "a--b", false},
      {kMoney, "$1,234.56", true},
      {kMoney, "$999", true},
      {kMoney, "$1234", false},
      {kMoney, "$12.5", false},
      {kDecimal, "-3.14", true},
      {kDecimal, "42", true},
      {kDecimal, "3.", false},
      {kDecimal, "+1", false},
      {kName, "Élodie Durand", true},
      {kName, "élodie", false},
      {kName, "Jean  Luc", false},
      {kChoice, "maybe", true},
      {kChoice, "yesno", false},
      {kSimpleEmail, "alice@example.com", true},
      {kSimpleEmail, "alice@example.org", false},
  });
}

TEST_CASE("regex realistic patterns as JSON Schema patterns inside a JSON string", "[grammar][regex]") {
  CheckCases(
      {
          {R"(^[A-Z]{3}-\d{4}$)", "ABC-1234", true},
          {R"(^[A-Z]{3}-\d{4}$)", "xABC-1234", false},
          {R"(\d{4}-\d{2}-\d{2})", R"(due \"2024-05-01\")", true},
          {R"(\d{4}-\d{2}-\d{2})", R"(due "2024-05-01")", false},
          {R"(^[^@\s]+@[^@\s]+$)", "a@b.c", true},
          {R"(^[^@\s]+@[^@\s]+$)", R"(a\n@b)", false},
          {R"(^[^@\s]+@[^@\s]+$)", R"(\"a\"@b)", true},
      },
      JsonContent(/*full_match=*/false));
}

}  // namespace
}  // namespace llmc::grammar
