#ifndef LLMC_GATEWAY_OPENAI_STRUCTURED_OUTPUT_REQUEST_H_
#define LLMC_GATEWAY_OPENAI_STRUCTURED_OUTPUT_REQUEST_H_

#include "absl/status/status.h"
#include "gateway/openai/json_fields.h"
#include "llmc/v1/types.pb.h"
#include "nlohmann/json.hpp"

namespace llmc::gateway {

// Reads the fields of a chat or completions body that restrict what may be generated into `sampling`:
//  - `constraint`, from at most one of OpenAI's response_format (json_object, json_schema), vLLM's
//    structured_outputs (json, regex, choice, grammar, json_object) and vLLM's older guided_json,
//    guided_regex, guided_choice and guided_grammar; its `source` names the field;
//  - logit_bias, allowed_token_ids and bad_words.
// Only shapes and sizes are checked here (common/request_limits.h): the worker checks token ids against the
// vocabulary, compiles the constraint and refuses what it cannot enforce. A JSON schema given as JSON is
// printed from `ordered`, since properties are generated in the order the client wrote them. None of these
// go with beam search: call this once sampling.beam_width is set. Errors are INVALID_ARGUMENT naming the
// parameter.
absl::Status ParseStructuredOutput(const nlohmann::json& body, OrderedBody& ordered, v1::SamplingParams& sampling);

}  // namespace llmc::gateway

#endif  // LLMC_GATEWAY_OPENAI_STRUCTURED_OUTPUT_REQUEST_H_
