#ifndef LLMC_TESTS_SUPPORT_SCRIPTED_WORKER_H_
#define LLMC_TESTS_SUPPORT_SCRIPTED_WORKER_H_

#include <memory>
#include <string>
#include <vector>

#include "grpcpp/server.h"
#include "llmc/v1/worker.grpc.pb.h"

namespace llmc::testing {

// The model the tests register a scripted worker (or another fake one) for.
inline constexpr char kScriptedModel[] = "scripted-model";

// What a scripted worker answers to every Generate call: one message per text, each holding one delta per
// choice (all `n` choices get the same texts), the last with `finish` and the usage.
struct WorkerScript {
  std::vector<std::string> texts;
  v1::FinishReason finish = v1::FINISH_REASON_STOP;
  uint32_t prompt_tokens = 5;
  // Not OK: the stream sends the texts (no finish reason, no usage) and then ends with this status, as a
  // worker whose model step failed does.
  grpc::StatusCode error_code = grpc::StatusCode::OK;
  std::string error_message = "";
};

// An in-process llmc.v1.Worker gRPC server on a free loopback port whose Generate streams a script instead
// of running a model. Register it with a controller through FakeWorker (its address()).
class ScriptedWorker {
 public:
  explicit ScriptedWorker(WorkerScript script);
  ~ScriptedWorker();
  ScriptedWorker(const ScriptedWorker&) = delete;
  ScriptedWorker& operator=(const ScriptedWorker&) = delete;

  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  int generate_calls() const;
  std::vector<v1::GenerateRequest> requests() const;

 private:
  class Service;
  std::unique_ptr<Service> service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
};

}  // namespace llmc::testing

#endif  // LLMC_TESTS_SUPPORT_SCRIPTED_WORKER_H_
