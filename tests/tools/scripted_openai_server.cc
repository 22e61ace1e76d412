#include "tests/tools/scripted_openai_server.h"

#include <stdexcept>
#include <utility>

#include "absl/time/clock.h"
#include "common/logging.h"

namespace llmc::testing {

using nlohmann::json;

class ScriptedOpenAiServer::Observer : public gateway::HttpObserver {
 public:
  void OnConnectionOpened() override { ++opened; }
  std::atomic<int> opened{0};
};

ScriptedOpenAiServer::ScriptedOpenAiServer(Script script) : script_(script), observer_(std::make_shared<Observer>()) {
  SetMinLogLevel(LogLevel::kWarning);  // no line per request
  gateway::HttpServerOptions options;
  options.num_threads = 2;
  options.sse_keepalive_interval = absl::Seconds(30);
  server_ = std::make_unique<gateway::HttpServer>(options, observer_);
  server_->Route("GET", "/v1/models", [](const gateway::HttpRequest&, std::shared_ptr<gateway::ResponseWriter> writer) {
    writer->Send(200, "application/json", R"({"object":"list","data":[{"id":"scripted","object":"model"}]})");
  });
  for (const bool chat : {true, false}) {
    server_->Route("POST", chat ? "/v1/chat/completions" : "/v1/completions",
                   [this, chat](const gateway::HttpRequest& request, std::shared_ptr<gateway::ResponseWriter> writer) {
                     json body = json::parse(request.body(), nullptr, /*allow_exceptions=*/false);
                     const std::string model = body.is_object() ? body.value("model", std::string()) : "";
                     {
                       absl::MutexLock lock(&mu_);
                       bodies_.push_back(body);
                     }
                     const int number = ++count_;
                     if (model == "fail-429") {
                       writer->Send(429, "application/json",
                                    R"({"error":{"message":"queue full","type":"rate_limit_error","code":429}})",
                                    {{"Retry-After", "1"}});
                       return;
                     }
                     if (model == "alternate" && number % 2 == 1) {
                       writer->Send(500, "application/json", R"({"error":{"message":"scripted failure"}})");
                       return;
                     }
                     auto gone = std::make_shared<std::atomic<bool>>(false);
                     writer->OnClientGone([gone] { *gone = true; });
                     absl::MutexLock lock(&mu_);
                     threads_.emplace_back([this, model, writer, gone, chat] { Stream(model, writer, gone, chat); });
                   });
  }
  auto address = server_->Start("127.0.0.1:0");
  if (!address.ok()) throw std::runtime_error(std::string(address.status().message()));
  port_ = address->port;
}

ScriptedOpenAiServer::~ScriptedOpenAiServer() {
  stopping_ = true;
  std::vector<std::thread> threads;
  {
    absl::MutexLock lock(&mu_);
    threads.swap(threads_);
  }
  for (auto& thread : threads) thread.join();
  server_->Stop();
}

std::vector<json> ScriptedOpenAiServer::bodies() const {
  absl::MutexLock lock(&mu_);
  return bodies_;
}

int ScriptedOpenAiServer::connections_opened() const { return observer_->opened; }

void ScriptedOpenAiServer::Stream(const std::string& model, std::shared_ptr<gateway::ResponseWriter> writer,
                                  std::shared_ptr<std::atomic<bool>> gone, bool chat) {
  const absl::Time start = absl::Now();
  // Sleeps until `when` in small steps; false when the client went away or the server is stopping.
  auto wait_until = [&](absl::Time when) {
    while (absl::Now() < when) {
      if (*gone || stopping_) return false;
      absl::SleepFor(std::min(absl::Milliseconds(5), when - absl::Now()));
    }
    return !*gone && !stopping_;
  };
  auto chunk = [chat](const std::string& text) {
    json choice = chat ? json{{"index", 0}, {"delta", {{"content", text}}}, {"finish_reason", nullptr}}
                       : json{{"index", 0}, {"text", text}, {"finish_reason", nullptr}};
    return json{
        {"id", "x"}, {"object", chat ? "chat.completion.chunk" : "text_completion"}, {"choices", json::array({choice})}}
        .dump();
  };
  const absl::Duration first = model == "slow" ? absl::Seconds(5) : script_.first_delay;
  if (!wait_until(start + first)) return;
  writer->StartEventStream();
  if (chat) {  // a role-only chunk right before the first text, as many servers send: it is no token
    writer->WriteEvent(
        R"({"id":"x","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant"}}]})");
  }
  writer->WriteEvent(chunk("tok0"));
  if (model == "stream-error") {
    writer->WriteEvent(R"({"error":{"message":"scripted stream failure","type":"server_error"}})");
    writer->WriteEvent("[DONE]");
    writer->EndEventStream();
    return;
  }
  for (int i = 1; i < script_.chunks; ++i) {
    if (!wait_until(start + first + script_.gap * i)) return;
    writer->WriteEvent(chunk(" tok" + std::to_string(i)));
  }
  if (model != "no-usage") {
    writer->WriteEvent(json{{"id", "x"},
                            {"choices", json::array()},
                            {"usage",
                             {{"prompt_tokens", 17},
                              {"completion_tokens", script_.chunks},
                              {"total_tokens", 17 + script_.chunks},
                              {"prompt_tokens_details", {{"cached_tokens", 5}}}}}}
                           .dump());
  }
  writer->WriteEvent("[DONE]");
  writer->EndEventStream();
}

}  // namespace llmc::testing
