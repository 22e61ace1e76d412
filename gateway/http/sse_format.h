#ifndef LLMC_GATEWAY_HTTP_SSE_FORMAT_H_
#define LLMC_GATEWAY_HTTP_SSE_FORMAT_H_

#include <string>

#include "absl/strings/string_view.h"

namespace llmc::gateway {

// The bytes of one Server-Sent Event carrying `data`: "data: <data>\n\n". Data with line breaks
// becomes one "data: " line per line, which a client joins back with "\n".
std::string FormatSseEvent(absl::string_view data);

// One chunk of chunked transfer encoding: hex size, CRLF, the bytes, CRLF.
std::string ChunkOf(absl::string_view bytes);

inline constexpr absl::string_view kLastChunk = "0\r\n\r\n";
inline constexpr absl::string_view kKeepaliveComment = ": keep-alive\n\n";

}  // namespace llmc::gateway

#endif  // LLMC_GATEWAY_HTTP_SSE_FORMAT_H_
