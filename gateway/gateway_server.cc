#include "gateway/gateway_server.h"

#include <algorithm>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "gateway/http/http_router.h"
#include "gateway/openai/openai_error.h"
#include "gateway/web/chat_page.h"
#include "nlohmann/json.hpp"
#include "prometheus/text_serializer.h"

namespace llmc::gateway {
namespace {

// Threads and queue for bodies beyond CompletionHandler::kInlineParseBytes: a burst of multi-MB requests
// waits in a short queue, and beyond it gets 429 rather than growing the gateway's memory.
constexpr int kLargeBodyThreads = 2;
constexpr size_t kLargeBodyQueue = 32;
// Each unary call to the controller; past it the cached routing table answers.
constexpr absl::Duration kControllerDeadline = absl::Seconds(1);
// After the grace period, time for the error events and 503s of the requests ended to reach their clients.
constexpr absl::Duration kFinalFlush = absl::Seconds(2);

HttpServerOptions HttpOptionsFrom(const config::GatewayConfig& config, std::vector<std::string> api_keys) {
  HttpServerOptions options;
  options.num_threads = config.num_threads;
  options.max_body_bytes = config.max_body_bytes;
  options.max_header_bytes = config.max_header_bytes;
  options.max_connections = config.max_connections;
  options.max_inflight_body_bytes = config.max_inflight_body_bytes;
  options.retry_after_seconds = config.retry_after_seconds;
  options.read_timeout = config.read_timeout;
  options.idle_timeout = config.idle_timeout;
  options.write_timeout = config.write_timeout;
  options.socket_send_buffer_bytes = config.socket_send_buffer_bytes;
  options.sse_keepalive_interval = config.sse_keepalive_interval;
  options.api_keys = std::move(api_keys);
  options.cors_allow_origins = config.cors_allow_origins;
  return options;
}

// One entry of /v1/models, and the answer of /v1/models/{id}.
nlohmann::ordered_json ModelJson(const v1::ModelSummary& model, int64_t created) {
  return {{"id", model.info().name()},
          {"object", "model"},
          {"created", created},
          {"owned_by", "llmc"},
          {"max_model_len", model.info().max_context_length()},
          {"dtype", model.info().dtype()},
          {"quantization", model.info().quantization().empty() ? "none" : model.info().quantization()},
          {"num_workers", model.num_workers()},
          {"num_ready", model.num_ready()}};
}

}  // namespace

GatewayServer::GatewayServer(config::GatewayConfig config)
    : config_(std::move(config)),
      metrics_(std::make_shared<GatewayMetrics>()),
      credentials_(internal_auth::LoadClusterCredentials(
          config_.internal_auth, std::getenv(internal_auth::kClusterSecretEnvironmentVariable))),
      channels_(credentials_.value_or(internal_auth::ClusterCredentials{})),
      router_(
          config_.controller_address, config_.routing_refresh_interval,
          [this](const std::vector<v1::WorkerInfo>& workers) {
            // Channels of workers that left (deregistered or expired) would otherwise pile up.
            absl::flat_hash_set<std::string> addresses;
            for (const v1::WorkerInfo& worker : workers) addresses.insert(worker.address());
            channels_.RetainOnly(addresses);
          },
          kControllerDeadline, credentials_.value_or(internal_auth::ClusterCredentials{})),
      dispatcher_(router_, channels_, {config_.max_attempts, config_.worker_accept_timeout},
                  [metrics = metrics_] { metrics->CountRetries(1); }),
      worker_calls_(router_, channels_, config_.max_attempts, config_.worker_call_timeout),
      completions_(dispatcher_, *metrics_, large_bodies_,
                   {config_.request_timeout, config_.retry_after_seconds, absl::StrCat("llmc-", LLMC_VERSION),
                    config_.cache_salt_per_api_key, config_.max_response_bytes}),
      worker_call_handler_(worker_calls_, router_, large_bodies_,
                           {config_.request_timeout, config_.retry_after_seconds}),
      large_bodies_(kLargeBodyThreads, kLargeBodyQueue) {}

GatewayServer::~GatewayServer() { Shutdown(); }

void GatewayServer::AddRoutes() {
  http_->Route("POST", "/v1/chat/completions", [this](const HttpRequest& request, std::shared_ptr<ResponseWriter> w) {
    completions_.Handle(OpenAiKind::kChat, request, std::move(w));
  });
  http_->Route("POST", "/v1/completions", [this](const HttpRequest& request, std::shared_ptr<ResponseWriter> w) {
    completions_.Handle(OpenAiKind::kCompletion, request, std::move(w));
  });
  http_->Route("POST", "/v1/responses", [this](const HttpRequest& request, std::shared_ptr<ResponseWriter> w) {
    completions_.HandleResponses(request, std::move(w));
  });
  http_->Route("POST", "/tokenize", [this](const HttpRequest& request, std::shared_ptr<ResponseWriter> w) {
    worker_call_handler_.HandleTokenize(request, std::move(w));
  });
  http_->Route("POST", "/detokenize", [this](const HttpRequest& request, std::shared_ptr<ResponseWriter> w) {
    worker_call_handler_.HandleDetokenize(request, std::move(w));
  });
  http_->Route("POST", "/v1/embeddings", [this](const HttpRequest& request, std::shared_ptr<ResponseWriter> w) {
    worker_call_handler_.HandleEmbeddings(request, std::move(w));
  });
  http_->Route("GET", "/v1/models",
               [this](const HttpRequest&, std::shared_ptr<ResponseWriter> w) { HandleModels(std::move(w)); });
  http_->Route("GET", "/v1/models/*", [this](const HttpRequest& request, std::shared_ptr<ResponseWriter> w) {
    HandleModel(HttpRouter::Remainder("/v1/models/*", {request.target().data(), request.target().size()}),
                std::move(w));
  });
  if (config_.serve_web_chat) {
    // The page itself carries no secret (the API key stays in the browser), so it needs none to load.
    http_->Route(
        "GET", "/",
        [](const HttpRequest&, std::shared_ptr<ResponseWriter> w) {
          w->Send(200, "text/html; charset=utf-8", std::string(ChatPageHtml()),
                  {{"Content-Security-Policy",
                    "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:; "
                    "connect-src *; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"},
                   {"X-Content-Type-Options", "nosniff"},
                   {"Cache-Control", "no-cache"}});
        },
        /*requires_auth=*/false);
  }
  http_->Route(
      "GET", "/version", [this](const HttpRequest&, std::shared_ptr<ResponseWriter> w) { HandleVersion(std::move(w)); },
      /*requires_auth=*/false);
  http_->Route(
      "GET", "/health", [this](const HttpRequest&, std::shared_ptr<ResponseWriter> w) { HandleHealth(std::move(w)); },
      /*requires_auth=*/false);
  http_->Route(
      "GET", "/ready", [this](const HttpRequest&, std::shared_ptr<ResponseWriter> w) { HandleReady(std::move(w)); },
      /*requires_auth=*/false);
  http_->Route(
      "GET", "/metrics", [this](const HttpRequest&, std::shared_ptr<ResponseWriter> w) { HandleMetrics(std::move(w)); },
      config_.metrics_require_api_key);
}

absl::Status GatewayServer::Start() {
  RETURN_IF_ERROR(credentials_.status());
  // The keys of the config, its api_keys_file and LLMC_API_KEYS; none at all is allowed on loopback only,
  // unless the config says allow_unauthenticated.
  ASSIGN_OR_RETURN(std::vector<std::string> api_keys, config_.EffectiveApiKeys(std::getenv("LLMC_API_KEYS")));
  RETURN_IF_ERROR(config_.CheckExposure(api_keys));
  if (api_keys.empty() && config_.allow_unauthenticated) {
    LLMC_LOG(Warning).With("address", config_.listen_address)
        << "allow_unauthenticated: serving without API keys to anyone who can connect";
  }
  router_.Start();
  http_ = std::make_unique<HttpServer>(HttpOptionsFrom(config_, std::move(api_keys)), metrics_);
  AddRoutes();
  ASSIGN_OR_RETURN(address_, http_->Start(config_.listen_address));
  LLMC_LOG(Info).With("http", address_.ToString()).With("controller", config_.controller_address) << "gateway ready";
  return absl::OkStatus();
}

void GatewayServer::Drain() {
  if (http_ == nullptr || draining_.exchange(true)) return Shutdown();
  http_->StopAccepting();
  if (const int64_t running = http_->requests_in_flight(); running > 0) {
    LLMC_LOG(Info) << "draining: waiting up to " << absl::FormatDuration(config_.drain_grace_period) << " for "
                   << running << " requests";
  }
  if (!http_->WaitForRequests(absl::Now() + config_.drain_grace_period)) {
    LLMC_LOG(Warning) << "drain grace period over: ending " << http_->requests_in_flight() << " requests";
    // Each generation and worker call ends with UNAVAILABLE ("the gateway is shutting down"), which its
    // handler answers through the still open connection: an error event and [DONE], or a 503.
    large_bodies_.Shutdown();
    // Cancelled, not waited for here: a stream whose client stopped reading holds its worker read until its
    // connection closes (write_timeout, or the http_->Stop() in Shutdown below), and waiting for it would
    // stretch the drain past drain_grace_period + kFinalFlush. Shutdown() waits once the connections are closed.
    dispatcher_.BeginShutdown();
    worker_calls_.Shutdown();  // no call holds a read: it ends as soon as gRPC answers the cancellation
    http_->WaitForRequests(absl::Now() + kFinalFlush);
  }
  Shutdown();
}

void GatewayServer::Shutdown() {
  // Outside in: no new requests, then every generation cancelled and finished, then the controller calls.
  if (http_ != nullptr) http_->Stop();
  large_bodies_.Shutdown();
  dispatcher_.Shutdown();
  worker_calls_.Shutdown();
  router_.Stop();
}

void GatewayServer::HandleModels(std::shared_ptr<ResponseWriter> writer) {
  router_.ListModels([writer](absl::StatusOr<std::vector<v1::ModelSummary>> models) {
    if (!models.ok()) return SendError(*writer, models.status(), 1);
    nlohmann::ordered_json data = nlohmann::ordered_json::array();
    const int64_t created = absl::ToUnixSeconds(absl::Now());
    for (const v1::ModelSummary& model : *models) data.push_back(ModelJson(model, created));
    writer->Send(200, "application/json", nlohmann::ordered_json{{"object", "list"}, {"data", data}}.dump());
  });
}

void GatewayServer::HandleModel(const std::string& id, std::shared_ptr<ResponseWriter> writer) {
  router_.ListModels([id, writer](absl::StatusOr<std::vector<v1::ModelSummary>> models) {
    if (!models.ok()) return SendError(*writer, models.status(), 1);
    for (const v1::ModelSummary& model : *models) {
      if (model.info().name() == id) {
        return writer->Send(200, "application/json", ModelJson(model, absl::ToUnixSeconds(absl::Now())).dump());
      }
    }
    SendError(
        *writer,
        WithErrorCode(absl::NotFoundError(absl::StrCat("The model '", id, "' does not exist")), "model_not_found"), 1);
  });
}

void GatewayServer::HandleVersion(std::shared_ptr<ResponseWriter> writer) {
  writer->Send(200, "application/json", nlohmann::ordered_json{{"version", LLMC_VERSION}}.dump());
}

void GatewayServer::HandleHealth(std::shared_ptr<ResponseWriter> writer) {
  if (router_.HasReadyWorker()) {
    writer->Send(200, "application/json", R"({"status":"ok"})");
  } else {
    SendError(*writer, absl::UnavailableError("no ready worker is known yet"), 1);
  }
}

// The gateway's own readiness: it takes requests whether or not a worker is ready, and answers those it
// cannot place with 503 and Retry-After itself. A probe on /health would take the gateway out of its
// Service whenever the workers are away, and clients would get "connection refused" instead.
// While it drains (SIGTERM) it is not ready, so that a load balancer that still holds a connection to it
// stops sending. Nor while the controller refuses its internal credentials: a gateway with the wrong
// secret could serve nothing, and a rollout that brings it stalls instead of replacing working gateways.
void GatewayServer::HandleReady(std::shared_ptr<ResponseWriter> writer) {
  if (draining_.load()) {
    return SendError(*writer, absl::UnavailableError("the gateway is shutting down"), config_.retry_after_seconds);
  }
  if (router_.refused_by_controller()) {
    return SendError(*writer,
                     absl::UnavailableError("the gateway could not authenticate to the controller (internal "
                                            "authentication failed)"),
                     config_.retry_after_seconds);
  }
  const std::vector<v1::WorkerInfo> workers = router_.replica().Workers();
  const auto ready = std::count_if(workers.begin(), workers.end(), [](const v1::WorkerInfo& worker) {
    return worker.state() == v1::WORKER_STATE_READY;
  });
  writer->Send(200, "application/json", nlohmann::ordered_json{{"status", "ready"}, {"ready_workers", ready}}.dump());
}

void GatewayServer::HandleMetrics(std::shared_ptr<ResponseWriter> writer) {
  metrics_->SetWorkerChannels(static_cast<int64_t>(channels_.size()));
  const std::string text = prometheus::TextSerializer().Serialize(metrics_->prometheus_registry()->Collect());
  writer->Send(200, "text/plain; version=0.0.4; charset=utf-8", text);
}

}  // namespace llmc::gateway
