#ifndef LLMC_COMMON_JSON_SHAPE_H_
#define LLMC_COMMON_JSON_SHAPE_H_

#include <cstddef>
#include <optional>
#include <string_view>

#include "absl/status/status.h"
#include "common/request_limits.h"

namespace llmc {

// Copying or printing JSON recurses once per level, and the order-keeping parse inserts keys with a linear
// search: a text nested thousands deep, or an object with a million keys, would crash or stall the process
// that parses it. One pass over the text, before any parse: INVALID_ARGUMENT "<what> nests JSON deeper than
// ..." when `text` nests deeper than `max_depth`, or "<what> has a JSON object with more than ...
// keys" past limits::kMaxJsonObjectKeys. Used by the gateway (the body, JSON inside its strings) and by the
// worker (the JSON fields of a request that came over gRPC), so that both refuse the same texts.
absl::Status CheckJsonShapeLimits(std::string_view text, std::string_view what,
                                  size_t max_depth = limits::kMaxJsonDepth);

// nlohmann's lexer reads a NUL byte as the end of the input (as in a C string), so it would take
// `{"a":1}<NUL>anything` for {"a":1}. JSON never holds a raw NUL (a string spells it \u0000), so a text
// holding one is not JSON: every parse of a text from outside the process checks this first. Returns the
// offset of the first NUL byte.
std::optional<size_t> FindNulByte(std::string_view text);

// INVALID_ARGUMENT "<what> is not valid JSON: it holds a NUL byte at offset N" when FindNulByte finds one.
absl::Status CheckNoNulByte(std::string_view text, std::string_view what);

}  // namespace llmc

#endif  // LLMC_COMMON_JSON_SHAPE_H_
