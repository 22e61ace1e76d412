#ifndef LLMC_WORKER_TYPED_OUTPUT_CONSTRAINT_GRAMMAR_H_
#define LLMC_WORKER_TYPED_OUTPUT_CONSTRAINT_GRAMMAR_H_

#include "absl/status/statusor.h"
#include "llmc/v1/types.pb.h"
#include "worker/grammar/grammar.h"
#include "worker/grammar/json_schema_compiler.h"

namespace llmc::typed_output {

// The grammar of an output constraint of any kind (docs/structured-outputs.md): a JSON Schema (compiled with
// `json_options`, its `strict` taken from the constraint), any JSON object, a regular expression (full
// match), a choice of strings, a GBNF grammar, or tool calls (BuildToolCallGrammar). INVALID_ARGUMENT for
// what cannot be enforced, without the request's field name (the caller adds it).
absl::StatusOr<grammar::Grammar> ConstraintGrammar(const v1::OutputConstraint& constraint,
                                                   const grammar::JsonSchemaOptions& json_options);

}  // namespace llmc::typed_output

#endif  // LLMC_WORKER_TYPED_OUTPUT_CONSTRAINT_GRAMMAR_H_
