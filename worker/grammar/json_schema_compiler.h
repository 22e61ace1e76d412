#ifndef LLMC_WORKER_GRAMMAR_JSON_SCHEMA_COMPILER_H_
#define LLMC_WORKER_GRAMMAR_JSON_SCHEMA_COMPILER_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "worker/grammar/grammar.h"

namespace llmc::grammar {

struct JsonSchemaOptions {
  // OpenAI's strict semantics: objects allow no properties beyond `properties` unless the schema says
  // otherwise. Without it, JSON Schema's own default (additional properties allowed) applies.
  bool strict = false;
  // 0: compact JSON, separators "," and ":" and no whitespace (nothing a model can loop in). N > 0: up to N
  // whitespace characters (space, \n, \t) wherever JSON allows whitespace.
  uint32_t max_whitespace = 0;
};

// The grammar of the JSON texts that validate against `schema` (draft 2020-12 as real schemas use it).
// Ordered JSON because object members are generated in the order `properties` lists them. A keyword that
// cannot be enforced is INVALID_ARGUMENT naming the keyword and where it is (a JSON pointer).
absl::StatusOr<Grammar> CompileJsonSchema(const nlohmann::ordered_json& schema, const JsonSchemaOptions& options);

// Any JSON object (OpenAI's response_format json_object).
Grammar JsonObjectGrammar(const JsonSchemaOptions& options);

}  // namespace llmc::grammar

#endif  // LLMC_WORKER_GRAMMAR_JSON_SCHEMA_COMPILER_H_
