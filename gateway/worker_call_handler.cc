#include "gateway/worker_call_handler.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gateway/completion_handler.h"
#include "gateway/openai/embedding_request.h"
#include "gateway/openai/openai_error.h"
#include "gateway/openai/tokenize_request.h"

namespace llmc::gateway {
namespace {

constexpr char kJson[] = "application/json";

// Resolves the model, calls the worker, and answers with to_json(response, model).
template <typename Request, typename Response, typename ToJson>
void CallWorker(WorkerRouter& router, UnaryDispatcher& workers, absl::Time deadline, uint32_t retry_after_seconds,
                std::shared_ptr<Request> request, std::shared_ptr<ResponseWriter> writer,
                void (v1::Worker::StubInterface::async_interface::*method)(grpc::ClientContext*, const Request*,
                                                                           Response*,
                                                                           std::function<void(grpc::Status)>),
                ToJson to_json) {
  ResolveModel(
      router, request->model(),
      [&workers, deadline, retry_after_seconds, request, writer, method, to_json](absl::StatusOr<std::string> model) {
        if (!model.ok()) return SendError(*writer, model.status(), retry_after_seconds);
        request->set_model(*model);
        auto response = std::make_shared<Response>();
        // A client that leaves cancels the worker call (an embedding request may hold many inputs).
        std::function<void()> cancel = workers.Call(
            *model, deadline,
            [request, response, method](v1::Worker::Stub& stub, grpc::ClientContext* context,
                                        std::function<void(grpc::Status)> done) {
              response->Clear();
              (stub.async()->*method)(context, request.get(), response.get(), std::move(done));
            },
            [writer, response, to_json, retry_after_seconds, model = *model](absl::Status status) {
              if (status.code() == absl::StatusCode::kNotFound) status = WithErrorCode(status, "model_not_found");
              if (!status.ok()) return SendError(*writer, status, retry_after_seconds);
              writer->Send(200, kJson, to_json(*response, model));
            });
        writer->OnClientGone(std::move(cancel));
      });
}

}  // namespace

void ResolveModel(WorkerRouter& router, const std::string& model,
                  std::function<void(absl::StatusOr<std::string>)> done) {
  if (!model.empty()) return done(model);
  router.ListModels([done = std::move(done)](absl::StatusOr<std::vector<v1::ModelSummary>> models) {
    if (!models.ok()) return done(models.status());
    if (models->size() == 1) return done(models->front().info().name());
    if (models->empty()) return done(absl::UnavailableError("no model is being served yet"));
    std::vector<std::string> names;
    for (const v1::ModelSummary& summary : *models) names.push_back(summary.info().name());
    done(InvalidParameter("model", absl::StrCat("'model' is required: this server serves ", names.size(), " models (",
                                                absl::StrJoin(names, ", "), ")")));
  });
}

void WorkerCallHandler::HandleTokenize(const HttpRequest& request, std::shared_ptr<ResponseWriter> writer) {
  WithBody(large_bodies_, request, std::move(writer), options_.retry_after_seconds,
           [this](std::string_view body, std::shared_ptr<ResponseWriter> writer) {
             absl::StatusOr<v1::TokenizeRequest> parsed = ParseTokenizeRequest(body);
             if (!parsed.ok()) return SendError(*writer, parsed.status(), options_.retry_after_seconds);
             CallWorker(router_, workers_, absl::Now() + options_.request_timeout, options_.retry_after_seconds,
                        std::make_shared<v1::TokenizeRequest>(*std::move(parsed)), std::move(writer),
                        &v1::Worker::StubInterface::async_interface::Tokenize,
                        [](const v1::TokenizeResponse& response, const std::string&) {
                          return TokenizeResponseJson(response);
                        });
           });
}

void WorkerCallHandler::HandleDetokenize(const HttpRequest& request, std::shared_ptr<ResponseWriter> writer) {
  WithBody(large_bodies_, request, std::move(writer), options_.retry_after_seconds,
           [this](std::string_view body, std::shared_ptr<ResponseWriter> writer) {
             absl::StatusOr<v1::DetokenizeRequest> parsed = ParseDetokenizeRequest(body);
             if (!parsed.ok()) return SendError(*writer, parsed.status(), options_.retry_after_seconds);
             CallWorker(router_, workers_, absl::Now() + options_.request_timeout, options_.retry_after_seconds,
                        std::make_shared<v1::DetokenizeRequest>(*std::move(parsed)), std::move(writer),
                        &v1::Worker::StubInterface::async_interface::Detokenize,
                        [](const v1::DetokenizeResponse& response, const std::string&) {
                          return DetokenizeResponseJson(response);
                        });
           });
}

void WorkerCallHandler::HandleEmbeddings(const HttpRequest& request, std::shared_ptr<ResponseWriter> writer) {
  WithBody(large_bodies_, request, std::move(writer), options_.retry_after_seconds,
           [this](std::string_view body, std::shared_ptr<ResponseWriter> writer) {
             absl::StatusOr<EmbeddingRequest> parsed = ParseEmbeddingRequest(body);
             if (!parsed.ok()) return SendError(*writer, parsed.status(), options_.retry_after_seconds);
             parsed->embed.set_request_id(writer->request_id());
             CallWorker(router_, workers_, absl::Now() + options_.request_timeout, options_.retry_after_seconds,
                        std::make_shared<v1::EmbedRequest>(std::move(parsed->embed)), std::move(writer),
                        &v1::Worker::StubInterface::async_interface::Embed,
                        [base64 = parsed->base64](const v1::EmbedResponse& response, const std::string& model) {
                          return EmbeddingResponseJson(response, model, base64);
                        });
           });
}

}  // namespace llmc::gateway
