// The GBNF front end: the grammar form it builds, llama.cpp-style example grammars matched against texts, and
// every syntax error with its message.
#include "worker/grammar/gbnf_parser.h"

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "tests/support/catch.h"
#include "worker/grammar/grammar.h"
#include "worker/grammar/matcher.h"

namespace llmc::grammar {
namespace {

Grammar Parse(const std::string& text) {
  absl::StatusOr<Grammar> grammar = ParseGbnf(text);
  INFO(text);
  INFO(grammar.status().ToString());
  REQUIRE(grammar.ok());
  return *std::move(grammar);
}

std::string ParseError(const std::string& text) {
  absl::StatusOr<Grammar> grammar = ParseGbnf(text);
  INFO(text);
  REQUIRE_FALSE(grammar.ok());
  CHECK(grammar.status().code() == absl::StatusCode::kInvalidArgument);
  return std::string(grammar.status().message());
}

bool Matches(const Grammar& grammar, const std::string& text) {
  absl::StatusOr<bool> matches = MatchesText(grammar, text);
  INFO(grammar.ToString());
  INFO(matches.status().ToString());
  REQUIRE(matches.ok());
  return *matches;
}

void CheckTexts(const std::string& gbnf, const std::vector<std::string>& matching,
                const std::vector<std::string>& not_matching) {
  const Grammar grammar = Parse(gbnf);
  for (const std::string& text : matching) {
    INFO("should match: " << text);
    CHECK(Matches(grammar, text));
  }
  for (const std::string& text : not_matching) {
    INFO("should not match: " << text);
    CHECK_FALSE(Matches(grammar, text));
  }
}

TEST_CASE("gbnf keeps rule names, in definition order, with root found by name", "[grammar][gbnf]") {
  const Grammar grammar = Parse(R"(
item ::= "x" next
root ::= item item
next ::= "y"
)");
  REQUIRE(grammar.rules.size() == 3);
  CHECK(grammar.rules[0].name == "item");
  CHECK(grammar.rules[1].name == "root");
  CHECK(grammar.rules[2].name == "next");
  CHECK(grammar.root == 1);
  CHECK(grammar.ToString() ==
        "item ::= (\"x\" next)\n"
        "root (root) ::= (item item)\n"
        "next ::= \"y\"\n");
}

TEST_CASE("gbnf builds literals, classes, groups and repetitions", "[grammar][gbnf]") {
  const Grammar grammar =
      Parse(R"(root ::= "a"{2,5} "b"{3} "c"{ 1 , } "d" ? "e"* "f"+ ("g" | "h") [a-z0-9_] . [^"\\])");
  const Expr& body = grammar.rules[0].body;
  REQUIRE(body.kind == Expr::Kind::kSequence);
  REQUIRE(body.children.size() == 10);
  struct Bounds {
    uint32_t min, max;
  };
  const Bounds bounds[] = {{2, 5}, {3, 3}, {1, kUnbounded}, {0, 1}, {0, kUnbounded}, {1, kUnbounded}};
  for (int i = 0; i < 6; ++i) {
    INFO("child " << i);
    const Expr& repeat = body.children[i];
    REQUIRE(repeat.kind == Expr::Kind::kRepeat);
    CHECK(repeat.min == bounds[i].min);
    CHECK(repeat.max == bounds[i].max);
    REQUIRE(repeat.children.size() == 1);
    CHECK(repeat.children[0].literal == std::string(1, static_cast<char>('a' + i)));
  }
  CHECK(body.children[6].kind == Expr::Kind::kChoice);
  CHECK(body.children[7].ranges == std::vector<CodePointRange>{{'0', '9'}, {'_', '_'}, {'a', 'z'}});
  CHECK(body.children[8].ranges == std::vector<CodePointRange>{{0, 0xD7FF}, {0xE000, kMaxCodePoint}});
  CHECK(body.children[9].ranges ==
        std::vector<CodePointRange>{{0, '"' - 1}, {'"' + 1, '\\' - 1}, {'\\' + 1, 0xD7FF}, {0xE000, kMaxCodePoint}});
}

TEST_CASE("gbnf literal escapes become UTF-8 bytes", "[grammar][gbnf]") {
  const Grammar grammar = Parse(R"(root ::= "\n\r\t\\\"\[\]-\x41\xE9\u20AC\U0001F600")");
  REQUIRE(grammar.rules[0].body.kind == Expr::Kind::kLiteral);
  // \xHH is a code point (as in llama.cpp), so \xE9 is é, two bytes.
  CHECK(grammar.rules[0].body.literal == "\n\r\t\\\"[]-A\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80");
}

TEST_CASE("gbnf layout: comments, rules over several lines, CRLF, a byte order mark", "[grammar][gbnf]") {
  const Grammar grammar = Parse(
      "\xEF\xBB\xBF# leading comment\r\n"
      "root ::= # the body starts on the next line\r\n"
      "  \"x\" rest\r\n"
      "  | \"y\"   # a second alternative\r\n"
      "  |\r\n"
      "rest\r\n"
      "  ::= ( \"1\"\r\n"
      "        \"2\" )  # ends here\r\n");
  CHECK(grammar.ToString() == "root (root) ::= ((\"x\" rest) | \"y\" | \"\")\nrest ::= (\"1\" \"2\")\n");
  CHECK(Matches(grammar, "x12"));
  CHECK(Matches(grammar, "y"));
  CHECK(Matches(grammar, ""));
  CHECK_FALSE(Matches(grammar, "x1"));
}

TEST_CASE("gbnf empty alternatives and groups", "[grammar][gbnf]") {
  CheckTexts("root ::= \"a\" opt \"b\"\nopt ::= \"x\" | ", {"ab", "axb"}, {"a", "axxb"});
  CheckTexts("root ::= | \"a\" ()", {"", "a"}, {"aa"});
  CheckTexts("root ::=\n", {""}, {"a"});
  CheckTexts("root ::= \"a\" ( ) \"b\"{0} \"c\"{0,0}", {"a"}, {"ab", "ac"});
}

TEST_CASE("gbnf arithmetic grammar", "[grammar][gbnf]") {
  CheckTexts(R"gbnf(
# Assignments of arithmetic over identifiers and integers, one a line.
root   ::= (expr "=" ws term "\n")+
expr   ::= term ([-+*/] ws term)*
term   ::= ident | num | "(" ws expr ")" ws
ident  ::= [a-z] [a-z0-9_]* ws
num    ::= [0-9]+ ws
ws     ::= [ \t\n]*
)gbnf",
             {"1+2=3\n", "(a + b1) * 3 = x\n", "x=1\ny = (2 / z_1)\n", "((1))=1\n"},
             {"1+=3\n", "1+2=3", "(1+2=3\n", "=3\n", "A=1\n", "1=2+3\n"});
}

TEST_CASE("gbnf JSON grammar", "[grammar][gbnf]") {
  CheckTexts(R"gbnf(
root   ::= object
value  ::= object | array | string | number | ("true" | "false" | "null") ws

object ::=
  "{" ws (
            string ":" ws value
    ("," ws string ":" ws value)*
  )? "}" ws

array  ::=
  "[" ws (
            value
    ("," ws value)*
  )? "]" ws

string ::=
  "\"" (
    [^"\\\x7F\x00-\x1F] |
    "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4}) # escapes
  )* "\"" ws

number ::= ("-"? ([0-9] | [1-9] [0-9]{1,15})) ("." [0-9]+)? ([eE] [-+]? [0-9]{1,4})? ws

# Optional space: at most one line break, then up to 20 spaces or tabs.
ws ::= | " " | "\n" [ \t]{0,20}
)gbnf",
             {"{}", "{\"a\": [1, 2.5, -3e10, true, null], \"b\": {\"c\": \"x\\\"y\\u00e9\"}}",
              "{\"k\":\"caf\xC3\xA9 \xF0\x9F\x98\x80\"}", "{\n  \"list\": [\n  ]\n}", "{\"n\": 1234567890123456}"},
             {"", "[]", "{\"a\": 01}", "{\"a\" 1}", "{\"a\": [1,]}", "{\"a\": \"\x01\"}", "{\"a\": tru}",
              "{\"a\": \"\\x\"}", "{\"a\": 1}}", "{\"n\": 12345678901234567}"});
}

TEST_CASE("gbnf list of items grammar", "[grammar][gbnf]") {
  CheckTexts(R"gbnf(
root ::= item+
# An item is a dash, a space and text without any kind of line break.
item ::= "- " [^\r\n\x0b\x0c\x85\u2028\u2029]+ "\n"
)gbnf",
             {"- milk\n", "- milk\n- eggs\n", "- caf\xC3\xA9 \xE2\x98\x95\n"},
             {"", "- \n", "milk\n", "- a",
              "- a\xE2\x80\xA8"
              "b\n",
              "- a\r\n"});
}

TEST_CASE("gbnf chess moves grammar", "[grammar][gbnf]") {
  CheckTexts(R"gbnf(
# A game in algebraic notation: numbered lines of two moves each, at least two lines.
root   ::= "1. " turn ( [1-9] [0-9]? ". " turn )+
turn   ::= move " " move "\n"
move   ::= ( pawn | piece | castle ) [+#]?
pawn   ::= ( [a-h] "x" )? [a-h] [1-8] ( "=" [NBRQ] )?
piece  ::= [NBRQK] [a-h]? [1-8]? "x"? [a-h] [1-8]
castle ::= "O-O" ( "-O" )?
)gbnf",
             {"1. e4 e5\n2. Nf3 Nc6\n3. Bb5 a6\n", "1. d4 d5\n2. c4 dxc4\n10. O-O-O Qxd8#\n",
              "1. e4 e5\n2. exd8=Q+ Kxd8\n", "1. e4 e5\n99. Nbd2 R1e7+\n"},
             {"1. e4 e5\n", "1. e9 e5\n2. d4 d5\n", "1. e4 e5\n0. d4 d5\n", "1. Pe4 e5\n2. d4 d5\n",
              "1. e4 e5\n2. O-O-O-O d5\n", "1. e4 e5\n100. d4 d5\n", "1. e4  e5\n2. d4 d5\n"});
}

TEST_CASE("gbnf C-like identifier list grammar", "[grammar][gbnf]") {
  CheckTexts(R"gbnf(
root  ::= ident ( ws "," ws ident ){0,9} ws   # one to ten identifiers
ident ::= [a-zA-Z_] [a-zA-Z0-9_]*
ws    ::= [ \t]*
)gbnf",
             {"a", "foo, _bar,baz9", "a,b,c,d,e,f,g,h,i,j", "x_1 ,\tY2  "},
             {"", "9a", "a,,b", "a, b,", "a,b,c,d,e,f,g,h,i,j,k", "a-b", "a b"});
}

TEST_CASE("gbnf Unicode escapes and classes", "[grammar][gbnf]") {
  CheckTexts(R"(root ::= "caf\u00e9 \U0001F600")", {"caf\xC3\xA9 \xF0\x9F\x98\x80"}, {"cafe \xF0\x9F\x98\x80", ""});
  // \xE9 is U+00E9, matched as its UTF-8 encoding, never as the lone byte E9.
  CheckTexts(R"(root ::= "\xE9")", {"\xC3\xA9"}, {"\xE9"});
  CheckTexts(R"(root ::= [\u0400-\u04FF]+)", {"\xD0\xBF\xD1\x80\xD0\xB8\xD0\xB2\xD0\xB5\xD1\x82"}, {"hello", ""});
  // Raw UTF-8 in classes: single characters and a range.
  CheckTexts("root ::= [\xCE\xB1\xCE\xB2\xCE\xB3] [\xD0\xB0-\xD1\x8F]", {"\xCE\xB2\xD0\xB6"},
             {"b\xD0\xB6", "\xCE\xB2z"});
  CheckTexts("root ::= [^\xCE\xB1]", {"b", "\xE2\x82\xAC", "\xF0\x9F\x98\x80"}, {"\xCE\xB1", "", "ab"});
  CheckTexts("root ::= .", {"a", "\xF0\x9F\x98\x80", "\n"}, {"", "ab", "\xF0\x9F\x98"});
  CheckTexts(R"(root ::= [\[\]\-\^\\\"]+)", {"[]-^\\\"", "^"}, {"a", "[a]"});
  CheckTexts(R"(root ::= [-a] [a-] [\U0001F600-\U0001F64F])", {"-a\xF0\x9F\x98\x80", "a-\xF0\x9F\x99\x8F"},
             {"b-\xF0\x9F\x98\x80", "aa\xF0\x9F\x99\x90"});
  CheckTexts(R"(root ::= [^"\\\n]* "\n")", {"plain text\n", "\n"}, {"a\"b\n", "a\\b\n", "a\nb\n"});
}

TEST_CASE("gbnf refuses a grammar without a root rule", "[grammar][gbnf]") {
  CHECK(ParseError("") == "GBNF: the grammar has no rule named 'root'");
  CHECK(ParseError("# only a comment\n") == "GBNF: the grammar has no rule named 'root'");
  CHECK(ParseError("start ::= \"a\"") == "GBNF: the grammar has no rule named 'root'");
}

TEST_CASE("gbnf refuses undefined and duplicate rules", "[grammar][gbnf]") {
  CHECK(ParseError("root ::= foo bar\nfoo ::= \"x\"") == "GBNF line 1, column 14: undefined rule 'bar'");
  CHECK(ParseError("root ::= \"a\"\n\nx ::= (\"b\" | value)\n") == "GBNF line 3, column 14: undefined rule 'value'");
  CHECK(ParseError("root ::= \"a\"\nroot ::= \"b\"") ==
        "GBNF line 2, column 1: rule 'root' is already defined (line 1, column 1)");
}

TEST_CASE("gbnf syntax errors name their line and column", "[grammar][gbnf]") {
  struct Case {
    std::string gbnf;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"root = \"a\"", "GBNF line 1, column 6: expected '::=' after rule name 'root'"},
      {"::= \"a\"", "GBNF line 1, column 1: expected a rule name, found ':'"},
      {"root ::= \"a\"\n  | \"b\"\n)", "GBNF line 3, column 1: unmatched ')'"},
      {"root ::= \"a\")", "GBNF line 1, column 13: unmatched ')'"},
      {"root ::= \"a\" b ::= \"c\"", "GBNF line 1, column 14: rule 'b' must start on a new line"},
      {"root ::= \"abc", "GBNF line 1, column 10: unterminated string literal"},
      {"root ::= 'abc'", "GBNF line 1, column 10: string literals use double quotes"},
      {"root ::= [a-z", "GBNF line 1, column 10: unterminated character class"},
      {"root ::= [z-a]", "GBNF line 1, column 11: character range U+007A-U+0061 is backwards"},
      {"root ::= \"\\q\"", "GBNF line 1, column 11: unknown escape sequence '\\q'"},
      {"root ::= \"a\\", "GBNF line 1, column 12: unfinished escape sequence"},
      {"root ::= \"\\x4\"", "GBNF line 1, column 11: \\x needs exactly 2 hex digits"},
      {"root ::= [\\u12G4]", "GBNF line 1, column 11: \\u needs exactly 4 hex digits"},
      {"root ::= \"\\U0001F60\"", "GBNF line 1, column 11: \\U needs exactly 8 hex digits"},
      {"root ::= \"\\U00110000\"", "GBNF line 1, column 11: U+110000 is beyond the last Unicode code point, U+10FFFF"},
      {"root ::= \"\\uD800\"", "GBNF line 1, column 11: U+D800 is a surrogate, which UTF-8 cannot encode"},
      {"root ::= [\\uDC00]", "GBNF line 1, column 11: U+DC00 is a surrogate, which UTF-8 cannot encode"},
      {"root ::= \"\xFF\"", "GBNF line 1, column 11: invalid UTF-8"},
      {"root ::= (\"a\" | \"b\"", "GBNF line 1, column 20: expected ')' to close the '(' at line 1, column 10"},
      {"root ::= (\"a\"\nx ::= \"b\"", "GBNF line 2, column 1: expected ')' to close the '(' at line 1, column 10"},
      {"root ::= * \"a\"", "GBNF line 1, column 10: '*' has nothing before it to repeat"},
      {"root ::= (+)", "GBNF line 1, column 11: '+' has nothing before it to repeat"},
      {"root ::= \"a\" | ?", "GBNF line 1, column 16: '?' has nothing before it to repeat"},
      {"root ::= \"a\"{}", "GBNF line 1, column 14: expected a number in the repetition count"},
      {"root ::= \"a\"{,3}", "GBNF line 1, column 14: expected a number in the repetition count"},
      {"root ::= \"a\"{2", "GBNF line 1, column 15: expected '}' to close the repetition count"},
      {"root ::= \"a\"{2,x}", "GBNF line 1, column 16: expected '}' to close the repetition count"},
      {"root ::= \"a\"{2,1}", "GBNF line 1, column 16: repetition {2,1} has its maximum below its minimum"},
      {"root ::= \"a\"{1000000}", "GBNF line 1, column 14: repetition count above the limit of 100000"},
      {"root ::= \"a\" ; \"b\"", "GBNF line 1, column 14: unexpected ';'"},
      {"root ::= \"a\" \x01", "GBNF line 1, column 14: unexpected '\\x01'"},
      // Columns count characters, not bytes.
      {"root ::= x\n# \xC3\xA9 comment\nx ::= \"\xC3\xA9\" @", "GBNF line 3, column 11: unexpected '@'"},
  };
  for (const Case& c : cases) {
    INFO(c.gbnf);
    CHECK(ParseError(c.gbnf) == c.message);
  }
}

TEST_CASE("gbnf refuses llama.cpp token references", "[grammar][gbnf]") {
  const std::string message =
      "GBNF line 1, column 10: token references (<[id]>, <name>, !<...>) are not supported; write the text instead";
  CHECK(ParseError("root ::= <[1234]>") == message);
  CHECK(ParseError("root ::= <think> \"x\"") == message);
  CHECK(ParseError("root ::= !<[12]>*") == message);
}

TEST_CASE("gbnf bounds nesting", "[grammar][gbnf]") {
  const std::string deep = "root ::= " + std::string(1000, '(') + "\"a\"" + std::string(1000, ')');
  CHECK(ParseError(deep) == "GBNF line 1, column 110: parentheses nested too deeply");
  const std::string stacked = "root ::= \"a\"" + std::string(1000, '?');
  CHECK(ParseError(stacked) == "GBNF line 1, column 112: expression nested too deeply");
  // Stacked repetitions within the bound are fine, as in llama.cpp.
  CheckTexts("root ::= \"ab\"?+", {"", "ab", "abab"}, {"a", "aba"});
  CheckTexts("root ::= (((((\"a\")))))", {"a"}, {""});
}

}  // namespace
}  // namespace llmc::grammar
