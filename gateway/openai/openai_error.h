#ifndef LLMC_GATEWAY_OPENAI_OPENAI_ERROR_H_
#define LLMC_GATEWAY_OPENAI_OPENAI_ERROR_H_

#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace llmc::gateway {

// INVALID_ARGUMENT naming the offending request parameter (reported as the envelope's `param`).
absl::Status InvalidParameter(std::string_view param, std::string_view message);
// The parameter a status names, or "" when it names none.
std::string ParameterOf(const absl::Status& status);

// Attaches an OpenAI error `code` (e.g. "model_not_found") to a status; by default the envelope's code is null.
absl::Status WithErrorCode(absl::Status status, std::string_view code);
std::string ErrorCodeOf(const absl::Status& status);

// Marks a status whose message was written for the client (it names no address, secret or exception text),
// so that ForClient passes it whatever its code: an INTERNAL that says what went wrong on the server's side.
absl::Status WithClientMessage(absl::Status status);

// The HTTP status for an error, from the table in common/status_codes.h (an OK status reads as 500: it is a
// bug to answer with an error body for it).
int HttpStatusOf(const absl::Status& status);

// The status as a client may see it. INTERNAL, UNKNOWN and DATA_LOSS (a failed model step, libtorch's or
// CUDA's exception text, a bug) and any other error whose text names the cluster's inside (worker addresses
// from gRPC's transport errors, exception text) get a generic message of the same code, keeping the payloads
// (`param`, `code`); the detail goes to the log at Warning. INVALID_ARGUMENT is the client's own and passes, and
// so does a status marked WithClientMessage.
absl::Status ForClient(const absl::Status& status);

// {"error":{"message","type","param","code"}} for a non-streaming error answer; its message is ForClient's.
std::string ErrorEnvelope(const absl::Status& status);
// The same envelope as the data of an SSE event, sent inside a stream before `data: [DONE]` (no framing).
std::string StreamErrorEvent(const absl::Status& status);

}  // namespace llmc::gateway

#endif  // LLMC_GATEWAY_OPENAI_OPENAI_ERROR_H_
