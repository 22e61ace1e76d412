// Availability: the real llmc-controller and llmc-gateway processes with in-process workers (scripted, or
// one that never answers). What a client sees while the controller restarts, while no worker is known,
// and while a worker holds a unary call: 200, or 503 with Retry-After; never a 404, a hang or a refused
// connection.
#include <signal.h>

#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server_builder.h"
#include "llmc/v1/worker.grpc.pb.h"
#include "nlohmann/json.hpp"
#include "tests/support/catch.h"
#include "tests/support/controller_process.h"
#include "tests/support/fake_worker.h"
#include "tests/support/gateway_process.h"
#include "tests/support/http_client.h"
#include "tests/support/scripted_worker.h"
#include "tests/support/wait.h"

namespace llmc::testing {
namespace {

using nlohmann::json;

std::string MinimalChatBody() {
  return json({{"model", kScriptedModel}, {"messages", json::array({{{"role", "user"}, {"content", "hi"}}})}}).dump();
}

// A worker whose Tokenize never answers, as a stopped process keeps its connection and says nothing.
class SilentWorker {
 public:
  SilentWorker() {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
    REQUIRE(server_ != nullptr);
  }
  ~SilentWorker() {
    service_.ReleaseAll();
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
    server_->Wait();
  }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  int calls() const { return service_.calls(); }

 private:
  class Service final : public v1::Worker::CallbackService {
   public:
    grpc::ServerUnaryReactor* Tokenize(grpc::CallbackServerContext* context, const v1::TokenizeRequest*,
                                       v1::TokenizeResponse*) override {
      grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
      absl::MutexLock lock(&mu_);
      held_.push_back(reactor);
      return reactor;
    }
    void ReleaseAll() {
      absl::MutexLock lock(&mu_);
      for (grpc::ServerUnaryReactor* reactor : held_) reactor->Finish(grpc::Status::CANCELLED);
      held_.clear();
    }
    int calls() const {
      absl::MutexLock lock(&mu_);
      return static_cast<int>(held_.size());
    }

   private:
    mutable absl::Mutex mu_;
    std::vector<grpc::ServerUnaryReactor*> held_ ABSL_GUARDED_BY(mu_);
  };

  Service service_;
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
};

TEST_CASE("availability: requests during a controller restart get 200 or 503 with Retry-After, never 404",
          "[integration][gateway][fault]") {
  auto controller = std::make_unique<ControllerProcess>(LLMC_CONTROLLER_BINARY, std::vector<std::string>{});
  const int controller_port = controller->grpc_port();
  WorkerScript script;
  script.texts = {"Hello"};
  ScriptedWorker worker(script);
  // Heartbeats a second apart: after the restart the worker is unknown to the controller for up to a second.
  FakeWorker registration(controller->address(), MakeRegistration("scripted-worker", worker.address(), kScriptedModel),
                          absl::Seconds(1));
  registration.Start();
  GatewayProcess gateway(LLMC_GATEWAY_BINARY, controller->address(), {"--routing_refresh_interval=100ms"});
  REQUIRE(gateway.WaitHealthy(absl::Seconds(10)));
  REQUIRE(PostJson(gateway.port(), "/v1/chat/completions", MinimalChatBody()).status == 200);

  absl::Mutex mu;
  std::map<int, int> statuses;
  int without_retry_after = 0;
  std::string last_failure;
  std::atomic<bool> stop{false};
  std::vector<std::thread> clients;
  for (int i = 0; i < 2; ++i) {
    clients.emplace_back([&] {
      while (!stop.load()) {
        const HttpReply reply =
            PostJson(gateway.port(), "/v1/chat/completions", MinimalChatBody(), {}, absl::Seconds(10));
        absl::MutexLock lock(&mu);
        ++statuses[reply.status];
        if (reply.status != 200) last_failure = reply.body + reply.error;
        if (reply.status == 503 && reply.Header("Retry-After").empty()) ++without_retry_after;
      }
    });
  }
  absl::SleepFor(absl::Milliseconds(300));
  controller->process().Signal(SIGTERM);
  REQUIRE(controller->process().WaitForExit(absl::Seconds(10)) == 0);
  controller.reset();
  // A restart: the routing table warms while the worker registers again (the test controllers' default is none).
  controller = std::make_unique<ControllerProcess>(LLMC_CONTROLLER_BINARY,
                                                   std::vector<std::string>{"--routing_warmup=5s"}, controller_port);
  // The gateway watches the new controller at once; the worker comes back on its next heartbeat.
  const bool back = WaitUntil([&] { return registration.successful_registrations() >= 2; }, absl::Seconds(10));
  absl::SleepFor(absl::Seconds(1));
  stop.store(true);
  for (std::thread& client : clients) client.join();
  REQUIRE(back);

  absl::MutexLock lock(&mu);
  int total = 0;
  for (const auto& [status, count] : statuses) {
    INFO("status " << status << ": " << count << " requests; last failure: " << last_failure);
    CHECK((status == 200 || status == 503));
    total += count;
  }
  CHECK(statuses[404] == 0);
  CHECK(without_retry_after == 0);
  CHECK(statuses[200] > 0);
  CHECK(total >= 10);
  INFO("gateway log:\n" << gateway.process().ReadLog());
  CHECK(PostJson(gateway.port(), "/v1/chat/completions", MinimalChatBody()).status == 200);
}

TEST_CASE("availability: with no worker the gateway stays ready and answers 503 with Retry-After",
          "[integration][gateway]") {
  ControllerProcess controller(LLMC_CONTROLLER_BINARY, {});
  GatewayProcess gateway(LLMC_GATEWAY_BINARY, controller.address(), {"--routing_refresh_interval=100ms"});
  // Readiness (the Kubernetes probe) is the gateway's own; /health still says whether a worker is ready.
  const HttpReply ready = HttpCall(gateway.port(), "GET", "/ready");
  CHECK(ready.status == 200);
  CHECK(json::parse(ready.body, nullptr, false)["ready_workers"] == 0);
  CHECK(gateway.HealthStatus() == 503);
  for (const std::string target : {"/v1/chat/completions", "/tokenize"}) {
    const std::string body =
        target == "/tokenize" ? json({{"model", kScriptedModel}, {"prompt", "hi"}}).dump() : MinimalChatBody();
    const HttpReply reply = PostJson(gateway.port(), target, body);
    INFO(target << ": " << reply.status << " " << reply.body);
    CHECK(reply.status == 503);
    CHECK(reply.Header("Retry-After") == "1");
  }
  CHECK(HttpCall(gateway.port(), "GET", "/ready").status == 200);
}

TEST_CASE("availability: a worker that never answers a tokenize call gets the client a 503 within the deadline",
          "[integration][gateway][fault]") {
  ControllerProcess controller(LLMC_CONTROLLER_BINARY, {});
  SilentWorker worker;
  FakeWorker registration(controller.address(), MakeRegistration("silent-worker", worker.address(), kScriptedModel),
                          absl::Milliseconds(200));
  registration.Start();
  GatewayProcess gateway(LLMC_GATEWAY_BINARY, controller.address(),
                         {"--routing_refresh_interval=100ms", "--worker_call_timeout=1s"});
  REQUIRE(gateway.WaitHealthy(absl::Seconds(10)));
  const absl::Time start = absl::Now();
  const HttpReply reply = PostJson(gateway.port(), "/tokenize",
                                   json({{"model", kScriptedModel}, {"prompt", "hi"}}).dump(), {}, absl::Seconds(20));
  const absl::Duration took = absl::Now() - start;
  INFO(reply.status << " " << reply.body << reply.error << " after " << took);
  CHECK(reply.status == 503);
  CHECK(reply.Header("Retry-After") == "1");
  CHECK(took < absl::Seconds(5));
  CHECK(worker.calls() >= 1);
}

}  // namespace
}  // namespace llmc::testing
