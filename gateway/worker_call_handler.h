#ifndef LLMC_GATEWAY_WORKER_CALL_HANDLER_H_
#define LLMC_GATEWAY_WORKER_CALL_HANDLER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/bounded_executor.h"
#include "gateway/dispatch/unary_dispatcher.h"
#include "gateway/dispatch/worker_router.h"
#include "gateway/http/http_handler.h"

namespace llmc::gateway {

// The endpoints answered by one unary worker call: POST /tokenize and /detokenize (vLLM's shapes,
// gateway/openai/tokenize_request.h) and POST /v1/embeddings. The body is checked here, then a worker
// serving the model tokenizes, detokenizes or embeds with that model's package.
class WorkerCallHandler {
 public:
  struct Options {
    absl::Duration request_timeout = absl::Seconds(600);
    uint32_t retry_after_seconds = 1;
  };

  WorkerCallHandler(UnaryDispatcher& workers, WorkerRouter& router, BoundedExecutor& large_bodies, Options options)
      : workers_(workers), router_(router), large_bodies_(large_bodies), options_(options) {}

  void HandleTokenize(const HttpRequest& request, std::shared_ptr<ResponseWriter> writer);
  void HandleDetokenize(const HttpRequest& request, std::shared_ptr<ResponseWriter> writer);
  // POST /v1/embeddings (gateway/openai/embedding_request.h).
  void HandleEmbeddings(const HttpRequest& request, std::shared_ptr<ResponseWriter> writer);

 private:
  UnaryDispatcher& workers_;
  WorkerRouter& router_;
  BoundedExecutor& large_bodies_;
  const Options options_;
};

// `model` itself when given; when empty (vLLM lets a client leave it out), the one model the cluster
// serves, or INVALID_ARGUMENT when it serves several. `done` may run on another thread.
void ResolveModel(WorkerRouter& router, const std::string& model,
                  std::function<void(absl::StatusOr<std::string>)> done);

}  // namespace llmc::gateway

#endif  // LLMC_GATEWAY_WORKER_CALL_HANDLER_H_
