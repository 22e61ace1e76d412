#ifndef LLMC_WORKER_GRAMMAR_REGEX_CHARSET_H_
#define LLMC_WORKER_GRAMMAR_REGEX_CHARSET_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "worker/grammar/grammar.h"
#include "worker/grammar/utf8_sequences.h"

// Code point sets and their encoding into grammar terminals, for the regular-expression compiler.
namespace llmc::grammar::regex_internal {

// Sorted, disjoint, merged; no surrogates.
using CodePointSet = std::vector<CodePointRange>;

CodePointSet NormalizeSet(CodePointSet set);
CodePointSet ComplementSet(const CodePointSet& set);

// \d and \w (ASCII), \s (ECMAScript's WhiteSpace and LineTerminator), and `.` (all but \n).
CodePointSet DigitSet();
CodePointSet WordSet();
CodePointSet SpaceSet();
CodePointSet DotSet();

// The code points of `text`; INVALID_ARGUMENT at the first byte that is not well-formed UTF-8.
absl::StatusOr<std::vector<uint32_t>> DecodeUtf8(absl::string_view text);

// How the characters a regex allows become grammar terminals: as their UTF-8 bytes, or, for the content of
// a JSON string literal, in the one form JSON text carries them (", \ and controls escaped, the rest raw).
class CharEncoder {
 public:
  explicit CharEncoder(bool json_string_content) : json_(json_string_content) {}

  // The bytes that produce `code_point`.
  std::string Encode(uint32_t code_point) const;
  // One character of `set` (a class node, plus the escaped forms in JSON mode); Nothing() when empty.
  Expr Set(const CodePointSet& set) const;
  // Any sequence of characters (JSON Schema's unanchored pattern ends).
  Expr AnyContent() const;

 private:
  bool json_;
};

}  // namespace llmc::grammar::regex_internal

#endif  // LLMC_WORKER_GRAMMAR_REGEX_CHARSET_H_
