// Fuzzes llmc-bench's Server-Sent Events parser. The events it returns must not depend on how the bytes
// were split into reads, and whatever the gateway's formatter writes must parse back to the same data.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "gateway/http/sse_format.h"
#include "tools/bench/sse_parser.h"

namespace {

constexpr size_t kMaxLineBytes = 4096;

struct Parsed {
  std::vector<std::string> events;
  bool ok = true;
};

// Feeds `bytes` in pieces whose sizes come from `split_seed` (1 to 16 bytes each).
Parsed ParseInPieces(absl::string_view bytes, uint8_t split_seed) {
  llmc::bench::SseParser parser(kMaxLineBytes);
  Parsed parsed;
  size_t state = split_seed;
  while (!bytes.empty() && parsed.ok) {
    state = state * 1103515245 + 12345;
    const size_t piece = std::min<size_t>(bytes.size(), 1 + (state >> 16) % 16);
    parsed.ok = parser.Feed(bytes.substr(0, piece), parsed.events);
    bytes.remove_prefix(piece);
  }
  return parsed;
}

[[noreturn]] void Fail(const char* what) {
  std::cerr << what << "\n";
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t split_seed = data[0];
  const absl::string_view bytes(reinterpret_cast<const char*>(data) + 1, size - 1);

  llmc::bench::SseParser whole_parser(kMaxLineBytes);
  Parsed whole;
  whole.ok = whole_parser.Feed(bytes, whole.events);
  const Parsed pieces = ParseInPieces(bytes, split_seed);
  if (whole.ok != pieces.ok) Fail("the line limit depends on how the stream was split");
  if (whole.ok && whole.events != pieces.events) Fail("events depend on how the stream was split");

  // The gateway's side: one event per input, with any bytes except CR. The formatter turns CR, LF and
  // CRLF alike into a line break, so a lone CR would come back as LF; the JSON it sends escapes both.
  std::string payload(bytes);
  payload.erase(std::remove(payload.begin(), payload.end(), '\r'), payload.end());
  if (payload.size() + 16 > kMaxLineBytes) return 0;
  Parsed echoed = ParseInPieces(llmc::gateway::FormatSseEvent(payload), split_seed);
  if (!echoed.ok || echoed.events.size() != 1 || echoed.events[0] != payload) {
    Fail("a formatted event did not parse back to its data");
  }
  return 0;
}
