#ifndef LLMC_WORKER_GRAMMAR_GRAMMAR_H_
#define LLMC_WORKER_GRAMMAR_GRAMMAR_H_

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace llmc::grammar {

// An inclusive range of Unicode code points.
struct CodePointRange {
  uint32_t first = 0;
  uint32_t last = 0;
  bool operator==(const CodePointRange& other) const { return first == other.first && last == other.last; }
};

inline constexpr uint32_t kMaxCodePoint = 0x10FFFF;
inline constexpr uint32_t kUnbounded = std::numeric_limits<uint32_t>::max();

// One node of a rule's body: the form every front end (JSON Schema, regular expressions, choice lists,
// GBNF) compiles to. Terminals are UTF-8 text: a literal's bytes, or one code point from a class (which the
// automaton expands into UTF-8 byte sequences, so a token may end inside a character).
struct Expr {
  enum class Kind { kEmpty, kLiteral, kCharClass, kRuleRef, kSequence, kChoice, kRepeat };

  Kind kind = Kind::kEmpty;
  std::string literal;                 // kLiteral: the exact bytes
  std::vector<CodePointRange> ranges;  // kCharClass: sorted, disjoint, merged; negation already applied
  int32_t rule = -1;                   // kRuleRef
  std::vector<Expr> children;          // kSequence, kChoice; kRepeat: exactly one
  uint32_t min = 0;                    // kRepeat
  uint32_t max = 0;                    // kRepeat; kUnbounded for no upper bound

  static Expr Empty() { return Expr(); }
  static Expr Literal(absl::string_view bytes);
  // Sorts and merges `ranges`; code points above kMaxCodePoint are dropped, surrogates (D800-DFFF) too,
  // since UTF-8 cannot carry them. An empty class matches nothing.
  static Expr CharClass(std::vector<CodePointRange> ranges);
  // Every code point except those in `ranges` (and surrogates).
  static Expr NegatedCharClass(std::vector<CodePointRange> ranges);
  static Expr RuleRef(int32_t rule);
  static Expr Sequence(std::vector<Expr> children);
  static Expr Choice(std::vector<Expr> children);
  static Expr Repeat(Expr child, uint32_t min, uint32_t max);
  static Expr Optional(Expr child) { return Repeat(std::move(child), 0, 1); }
  static Expr Star(Expr child) { return Repeat(std::move(child), 0, kUnbounded); }
  static Expr Plus(Expr child) { return Repeat(std::move(child), 1, kUnbounded); }
  // An alternative that matches nothing at all (an empty class): what a contradiction compiles to.
  static Expr Nothing() { return CharClass({}); }
};

struct Rule {
  std::string name;
  Expr body;
};

// Named rules; `root` is where matching starts and must end. Rules may refer to each other in any order and
// recursively, but not left-recursively (the automaton refuses that by name).
struct Grammar {
  std::vector<Rule> rules;
  int32_t root = 0;

  // A new rule with an empty body; its id.
  int32_t AddRule(std::string name, Expr body = Expr::Empty());
  // The id of the rule named `name`, or -1.
  int32_t FindRule(absl::string_view name) const;
  // GBNF-like text, for messages and tests (and as a stable cache key).
  std::string ToString() const;
};

std::string ExprToString(const Expr& expr, const Grammar& grammar);

}  // namespace llmc::grammar

#endif  // LLMC_WORKER_GRAMMAR_GRAMMAR_H_
