#include "tests/support/scripted_worker.h"

#include <algorithm>
#include <stdexcept>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server_builder.h"

namespace llmc::testing {
namespace {

// Builds the whole answer up front: message i carries text i for every choice.
std::vector<v1::GenerateResponse> BuildMessages(const WorkerScript& script, const v1::GenerateRequest& request) {
  const uint32_t choices = std::max<uint32_t>(1, request.sampling().n());
  std::vector<v1::GenerateResponse> messages;
  for (size_t i = 0; i < script.texts.size(); ++i) {
    v1::GenerateResponse message;
    for (uint32_t choice = 0; choice < choices; ++choice) {
      v1::TokenDelta* delta = message.add_deltas();
      delta->set_choice_index(choice);
      delta->set_index(static_cast<uint32_t>(i));
      delta->add_token_ids(static_cast<int32_t>(1000 + i));
      delta->set_text(script.texts[i]);
      if (i + 1 == script.texts.size() && script.error_code == grpc::StatusCode::OK) {
        delta->set_finish_reason(script.finish);
      }
    }
    messages.push_back(std::move(message));
  }
  if (script.error_code != grpc::StatusCode::OK) return messages;
  if (messages.empty()) messages.emplace_back();
  v1::Usage* usage = messages.back().mutable_usage();
  usage->set_prompt_tokens(script.prompt_tokens);
  usage->set_completion_tokens(static_cast<uint32_t>(script.texts.size()) * choices);
  usage->set_total_tokens(usage->prompt_tokens() + usage->completion_tokens());
  return messages;
}

// Writes the prepared messages one at a time (one write in flight).
class ScriptReactor final : public grpc::ServerWriteReactor<v1::GenerateResponse> {
 public:
  ScriptReactor(std::vector<v1::GenerateResponse> messages, grpc::Status end)
      : messages_(std::move(messages)), end_(std::move(end)) {
    WriteNext();
  }

  void OnWriteDone(bool ok) override {
    if (!ok) return Finish(grpc::Status(grpc::StatusCode::CANCELLED, "write failed"));
    WriteNext();
  }
  void OnDone() override { delete this; }

 private:
  void WriteNext() {
    if (next_ == messages_.size()) return Finish(end_);
    StartWrite(&messages_[next_++]);
  }

  std::vector<v1::GenerateResponse> messages_;
  const grpc::Status end_;
  size_t next_ = 0;
};

}  // namespace

class ScriptedWorker::Service final : public v1::Worker::CallbackService {
 public:
  explicit Service(WorkerScript script) : script_(std::move(script)) {}

  grpc::ServerWriteReactor<v1::GenerateResponse>* Generate(grpc::CallbackServerContext*,
                                                           const v1::GenerateRequest* request) override {
    {
      absl::MutexLock lock(&mu_);
      requests_.push_back(*request);
    }
    return new ScriptReactor(BuildMessages(script_, *request), grpc::Status(script_.error_code, script_.error_message));
  }

  int calls() const {
    absl::MutexLock lock(&mu_);
    return static_cast<int>(requests_.size());
  }
  std::vector<v1::GenerateRequest> requests() const {
    absl::MutexLock lock(&mu_);
    return requests_;
  }

 private:
  const WorkerScript script_;
  mutable absl::Mutex mu_;
  std::vector<v1::GenerateRequest> requests_ ABSL_GUARDED_BY(mu_);
};

ScriptedWorker::ScriptedWorker(WorkerScript script) : service_(std::make_unique<Service>(std::move(script))) {
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
  builder.RegisterService(service_.get());
  server_ = builder.BuildAndStart();
  if (server_ == nullptr || port_ == 0) throw std::runtime_error("the scripted worker's gRPC server did not start");
}

ScriptedWorker::~ScriptedWorker() {
  if (server_ != nullptr) server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
}

int ScriptedWorker::generate_calls() const { return service_->calls(); }

std::vector<v1::GenerateRequest> ScriptedWorker::requests() const { return service_->requests(); }

}  // namespace llmc::testing
