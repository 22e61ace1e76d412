#ifndef LLMC_GATEWAY_HTTP_ERROR_BODY_H_
#define LLMC_GATEWAY_HTTP_ERROR_BODY_H_

#include <string>

#include "absl/strings/string_view.h"

namespace llmc::gateway {

// The OpenAI error envelope: {"error":{"message":...,"type":...,"param":null,"code":...}}; an empty `code`
// is written as null.
std::string OpenAiErrorBody(absl::string_view message, absl::string_view type, absl::string_view code);

}  // namespace llmc::gateway

#endif  // LLMC_GATEWAY_HTTP_ERROR_BODY_H_
