// Shared by the JSON Schema compiler's files (json_schema_*.cc); not part of the library's API.
#ifndef LLMC_WORKER_GRAMMAR_JSON_SCHEMA_INTERNAL_H_
#define LLMC_WORKER_GRAMMAR_JSON_SCHEMA_INTERNAL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"
#include "worker/grammar/grammar.h"
#include "worker/grammar/json_schema_compiler.h"

namespace llmc::grammar::json_schema {

using Json = nlohmann::ordered_json;

// anyOf x oneOf cross products beyond this many branches are refused rather than built.
constexpr size_t kMaxSchemaBranches = 64;

// ---- Expressions (json_schema_keywords.cc, like the keyword sets, types and errors below) ----

bool IsNothing(const Expr& expr);
// Sequence and Choice that fold contradictions: a sequence with a Nothing is Nothing, a choice drops them.
Expr Seq(std::vector<Expr> children);
Expr Alt(std::vector<Expr> children);
Expr Lit(absl::string_view bytes);
Expr Chars(absl::string_view members);  // a class of the listed ASCII characters
Expr Range(char first, char last);
Expr Digit();
Expr HexDigit();

// ---- Errors and locations ----

std::string PointerAppend(absl::string_view pointer, absl::string_view token);
std::string PointerAppend(absl::string_view pointer, size_t index);
std::string DisplayPointer(absl::string_view pointer);
absl::Status Unsupported(absl::string_view keyword, absl::string_view pointer, absl::string_view why = "");
absl::Status InvalidValue(absl::string_view keyword, absl::string_view pointer, absl::string_view why);

// A non-negative integer keyword value (minLength, maxItems, ...).
absl::StatusOr<uint32_t> CountKeyword(const Json& schema, absl::string_view keyword, absl::string_view pointer);
// A count range from a keyword pair (minLength/maxLength, minItems/maxItems, ...): 0 and kUnbounded when absent.
struct CountBounds {
  uint32_t min = 0;
  uint32_t max = kUnbounded;
};
absl::StatusOr<CountBounds> ReadCountBounds(const Json& schema, absl::string_view min_keyword,
                                            absl::string_view max_keyword, absl::string_view pointer);

// ---- JSON types ----

enum TypeBits : uint32_t {
  kNullBit = 1,
  kBooleanBit = 2,
  kObjectBit = 4,
  kArrayBit = 8,
  kStringBit = 16,
  kIntegerBit = 32,     // numbers with an integer value
  kFractionalBit = 64,  // numbers with a fractional part
  kAllTypes = 127,
};
// The types `type` allows (kAllTypes without it).
absl::StatusOr<uint32_t> DeclaredTypes(const Json& schema, absl::string_view pointer);
uint32_t TypeOfValue(const Json& value);

// ---- Strings (json_schema_strings.cc, json_schema_formats.cc) ----

// One character of a JSON string's content, raw or escaped, counting one code point (a surrogate pair
// escape is one character, lone surrogates are not produced).
Expr JsonStringChar();
// The one encoding nlohmann::json's dump() writes: escapes only for '"', '\' and control characters (short
// forms where JSON has them, else \u00xx in lower case). Every string has exactly one such encoding, which is
// what lets an object exclude its listed keys from its additional ones.
Expr CanonicalStringChar();
// RFC 3339 / 4122 / simplified 5321, 1123, 3986 grammars of the string content; NotFound for an unknown
// format. Every character they produce is one JSON needs no escape for.
absl::StatusOr<Expr> FormatContent(absl::string_view format);
// The fewest and most code points an expression over code points (not escaped text) matches.
struct LengthBounds {
  uint32_t min = 0;
  uint32_t max = kUnbounded;
};
LengthBounds ExprLengthBounds(const Expr& expr);
size_t CodePointCount(absl::string_view utf8);

// ---- Numbers (json_schema_numbers.cc) ----

// The JSON numbers (integers only if `integer`) within the schema's minimum/maximum/exclusive*, exactly where
// the bounds are; multipleOf other than 1 on integers is refused.
absl::StatusOr<Expr> NumberExpr(const Json& schema, absl::string_view pointer, bool integer);
// Whether a numeric enum/const value satisfies the schema's bounds and multipleOf.
absl::StatusOr<bool> NumberSatisfies(const Json& value, const Json& schema, absl::string_view pointer);

// ---- Keyword sets ----

bool IsMetadataKeyword(absl::string_view keyword);
// Keywords that assert something about the instance (everything but metadata and $defs).
bool IsAssertionKeyword(absl::string_view keyword);
bool IsObjectKeyword(absl::string_view keyword);
bool IsArrayKeyword(absl::string_view keyword);
// INVALID_ARGUMENT for the first keyword the compiler does not enforce (uniqueItems true among them).
absl::Status CheckKeywords(const Json& schema, absl::string_view pointer);

class SchemaCompiler {
 public:
  SchemaCompiler(const Json& root, const JsonSchemaOptions& options);

  absl::StatusOr<Grammar> CompileRoot();
  Grammar AnyObjectGrammar();

  // ---- used across the files ----
  absl::StatusOr<Expr> CompileSchema(const Json& schema, const std::string& pointer, int depth);
  // CompileSchema, as a rule reference unless the expression is small (keeps repeated and duplicated
  // positions from copying large automata).
  absl::StatusOr<Expr> CompileValue(const Json& schema, const std::string& pointer, int depth);
  // A reference to a rule with `body`, shared with any earlier rule of the same body.
  Expr Intern(absl::string_view name_hint, Expr body);
  Expr Ws() const;
  Expr AnyValue();
  Expr AnyString();
  const JsonSchemaOptions& options() const { return options_; }

  // ---- json_schema_merge.cc ----
  // The target of a local $ref (JSON pointer within the document).
  absl::StatusOr<const Json*> ResolveRef(const Json& ref, absl::string_view pointer, std::string* target_pointer);
  // One schema equivalent to all of `schemas` (allOf), refs at their top level resolved.
  absl::StatusOr<Json> MergeAll(const std::vector<Json>& schemas, const std::string& pointer, int depth);
  // Possible types of a schema's instances, refs and applicators followed.
  absl::StatusOr<uint32_t> PossibleTypes(const Json& schema, absl::string_view pointer, int depth);
  // Whether oneOf's branches can never both match (so oneOf is anyOf), for instances of `context_types` (what
  // the keywords beside the oneOf allow).
  absl::Status CheckOneOfDisjoint(const Json& branches, const std::string& pointer, int depth, uint32_t context_types);

 private:
  // ---- json_schema_compiler.cc ----
  absl::StatusOr<Expr> CompileRef(const Json& ref, const std::string& pointer, int depth);
  absl::StatusOr<Expr> CompileApplicators(const Json& schema, const std::string& pointer, int depth);
  absl::StatusOr<Expr> CompileEnum(const Json& schema, const std::string& pointer, uint32_t types);
  absl::StatusOr<bool> EnumValueAllowed(const Json& value, const Json& schema, const std::string& pointer);
  absl::StatusOr<Expr> CompileTypes(const Json& schema, const std::string& pointer, int depth, uint32_t types);
  // ---- json_schema_objects.cc ----
  absl::StatusOr<Expr> CompileObject(const Json& schema, const std::string& pointer, int depth);
  absl::StatusOr<Expr> CompileArray(const Json& schema, const std::string& pointer, int depth);
  // ---- json_schema_strings.cc ----
  absl::StatusOr<Expr> CompileString(const Json& schema, const std::string& pointer);
  // Between min and max string characters (max may be kUnbounded).
  Expr RepeatCharacters(uint32_t min, uint32_t max);
  // A quoted string of canonical encoding whose content is none of `excluded` (raw, unencoded keys).
  Expr KeyExcluding(const std::vector<std::string>& excluded);

  const Json& root_;
  JsonSchemaOptions options_;
  Grammar grammar_;
  absl::flat_hash_map<std::string, int32_t> ref_rules_;   // target pointer -> rule
  absl::flat_hash_map<std::string, int32_t> interned_;    // body text -> rule
  absl::flat_hash_map<std::string, uint32_t> ref_types_;  // target pointer -> PossibleTypes
  int32_t value_rule_ = -1;
  int32_t string_rule_ = -1;
};

}  // namespace llmc::grammar::json_schema

#endif  // LLMC_WORKER_GRAMMAR_JSON_SCHEMA_INTERNAL_H_
