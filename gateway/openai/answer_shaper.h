#ifndef LLMC_GATEWAY_OPENAI_ANSWER_SHAPER_H_
#define LLMC_GATEWAY_OPENAI_ANSWER_SHAPER_H_

#include <cstddef>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gateway/http/sse_format.h"
#include "llmc/v1/worker.pb.h"

namespace llmc::gateway {

// How the worker messages of one request become its HTTP answer, in one API's shape: Chat Completions and
// Completions (chunks, `data: [DONE]`) or the Responses API (named events, a `response` object). The
// completion handler runs the generations and calls one of these; it knows no API's JSON itself.
// Not thread-safe: one instance per request, used by one thread at a time.
class AnswerShaper {
 public:
  virtual ~AnswerShaper() = default;

  // Streaming: the events that open the stream (sent with the first worker message), those for each worker
  // message (`prompt`: the prompt whose generation sent it), and those that close the stream, after the
  // last message, with the usage summed over the generations. An error from OnResponse (an aborted choice,
  // a message the request cannot have) ends the answer: the caller cancels the generations and sends Fail.
  virtual std::vector<SseEvent> Start() = 0;
  virtual absl::StatusOr<std::vector<SseEvent>> OnResponse(const v1::GenerateResponse& response, size_t prompt) = 0;
  virtual std::vector<SseEvent> Finish(const v1::Usage& usage) = 0;
  // The events that end a stream that failed after it started (`status` is an error).
  virtual std::vector<SseEvent> Fail(const absl::Status& status) = 0;

  // Not streaming: every worker message, then the answer's JSON body. Errors as for OnResponse; after one
  // the caller answers with the error instead.
  virtual absl::Status Accumulate(const v1::GenerateResponse& response, size_t prompt) = 0;
  virtual std::string FinalJson(const v1::Usage& usage) = 0;
  // About the size of the body FinalJson would give now: the caller ends the answer with an error once it
  // passes the gateway's max_response_bytes.
  virtual size_t AnswerBytes() const = 0;

  // An error about to be sent, as this API names it (a request field renamed to the one the client sent).
  virtual absl::Status MapError(absl::Status status) const { return status; }
};

}  // namespace llmc::gateway

#endif  // LLMC_GATEWAY_OPENAI_ANSWER_SHAPER_H_
