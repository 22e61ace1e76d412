#ifndef LLMC_GATEWAY_HTTP_SSE_FORMAT_H_
#define LLMC_GATEWAY_HTTP_SSE_FORMAT_H_

#include <string>
#include <utility>

#include "absl/strings/string_view.h"

namespace llmc::gateway {

// One Server-Sent Event: its data and, optionally, its type (the `event:` field). Chat Completions streams
// send data only; the Responses API names each event (`event: response.output_text.delta`). An event with
// data only converts from the data itself.
struct SseEvent {
  SseEvent(std::string data) : data(std::move(data)) {}  // NOLINT(google-explicit-constructor)
  SseEvent(const char* data) : data(data) {}             // NOLINT(google-explicit-constructor)
  SseEvent(std::string name, std::string data) : name(std::move(name)), data(std::move(data)) {}

  std::string name;  // empty: no `event:` line (clients read the event as a plain "message")
  std::string data;
};

// The bytes of one Server-Sent Event carrying `data`: "data: <data>\n\n", after "event: <name>\n" when
// `name` is given (cut at a line break, if it held one). Data with line breaks becomes one "data: " line
// per line, which a client joins back with "\n".
std::string FormatSseEvent(absl::string_view data, absl::string_view name = {});

// One chunk of chunked transfer encoding: hex size, CRLF, the bytes, CRLF.
std::string ChunkOf(absl::string_view bytes);

inline constexpr absl::string_view kLastChunk = "0\r\n\r\n";
inline constexpr absl::string_view kKeepaliveComment = ": keep-alive\n\n";

}  // namespace llmc::gateway

#endif  // LLMC_GATEWAY_HTTP_SSE_FORMAT_H_
