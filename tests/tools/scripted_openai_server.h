#ifndef LLMC_TESTS_TOOLS_SCRIPTED_OPENAI_SERVER_H_
#define LLMC_TESTS_TOOLS_SCRIPTED_OPENAI_SERVER_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "gateway/http/http_server.h"
#include "nlohmann/json.hpp"

namespace llmc::testing {

// A fake OpenAI streaming server on 127.0.0.1 (the gateway's HttpServer) whose answers follow a script
// chosen by the request's "model":
//   "scripted"      first chunk after `first_delay`, then `chunks - 1` more every `gap` (on an absolute
//                   schedule, so delays do not add up), a usage chunk (prompt_tokens 17 of which 5 cached,
//                   completion_tokens = chunks), [DONE]
//   "no-usage"      the same without the usage chunk
//   "alternate"     odd-numbered requests (1st, 3rd, ...) get 500, the others the script
//   "fail-429"      429 with Retry-After and an OpenAI error body
//   "stream-error"  one chunk, then an {"error": ...} event and [DONE]
//   "slow"          first chunk only after 5 s (ends early when the client goes away)
// GET /v1/models lists "scripted". Every request body is recorded.
class ScriptedOpenAiServer {
 public:
  struct Script {
    absl::Duration first_delay = absl::Milliseconds(200);
    absl::Duration gap = absl::Milliseconds(50);
    int chunks = 10;
  };

  explicit ScriptedOpenAiServer(Script script);
  ScriptedOpenAiServer() : ScriptedOpenAiServer(Script{}) {}
  ~ScriptedOpenAiServer();  // stops the scripts and joins their threads, then the server

  uint16_t port() const { return port_; }
  std::string base_url() const { return "http://127.0.0.1:" + std::to_string(port_) + "/v1"; }

  std::vector<nlohmann::json> bodies() const;
  int connections_opened() const;

 private:
  class Observer;
  void Stream(const std::string& model, std::shared_ptr<gateway::ResponseWriter> writer,
              std::shared_ptr<std::atomic<bool>> gone, bool chat);

  Script script_;
  std::shared_ptr<Observer> observer_;
  std::atomic<bool> stopping_{false};
  std::atomic<int> count_{0};
  mutable absl::Mutex mu_;
  std::vector<nlohmann::json> bodies_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread> threads_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<gateway::HttpServer> server_;
  uint16_t port_ = 0;
};

}  // namespace llmc::testing

#endif  // LLMC_TESTS_TOOLS_SCRIPTED_OPENAI_SERVER_H_
