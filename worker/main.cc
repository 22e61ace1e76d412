// llmc-worker: serves one model to gateways and reports its load to the controller.
#include <iostream>

#include "common/config/worker_config.h"
#include "common/logging.h"
#include "common/main_support.h"
#include "common/shutdown.h"
#include "worker/service/worker_server.h"

int main(int argc, char** argv) {
  llmc::ShutdownSignal shutdown;
  llmc::config::WorkerConfig config;
  const llmc::config::ProgramInfo program{"llmc-worker", "worker", "runs a model and streams tokens over gRPC"};
  if (auto exit_code = llmc::LoadConfigOrExit(program, argc, argv, config)) return *exit_code;
  if (config.model_path.empty()) {
    std::cerr << "llmc-worker: model_path is required (--model_path=DIR or worker.model_path in --config)\n";
    return 2;
  }

  llmc::worker::WorkerServer server(config);
  if (absl::Status status = server.Start(); !status.ok()) {
    LLMC_LOG(Error) << status.message();
    return 1;
  }
  shutdown.Wait();
  server.Drain();
  return 0;
}
