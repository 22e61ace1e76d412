#include "gateway/http/sse_format.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace llmc::gateway {

std::string FormatSseEvent(absl::string_view data, absl::string_view name) {
  std::string event;
  event.reserve(data.size() + name.size() + 16);
  if (!name.empty()) absl::StrAppend(&event, "event: ", name.substr(0, name.find_first_of("\r\n")), "\n");
  size_t start = 0;
  while (true) {
    const size_t end = data.find_first_of("\r\n", start);
    absl::StrAppend(&event, "data: ", data.substr(start, end - start), "\n");
    if (end == absl::string_view::npos) break;
    start = end + 1;
    if (data[end] == '\r' && start < data.size() && data[start] == '\n') ++start;  // CRLF is one break
  }
  event += '\n';
  return event;
}

std::string ChunkOf(absl::string_view bytes) { return absl::StrFormat("%x\r\n%s\r\n", bytes.size(), bytes); }

}  // namespace llmc::gateway
