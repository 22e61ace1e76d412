// llmc-worker: serves one model to gateways and reports its load to the controller.
#include <iostream>

#include "common/config/worker_config.h"
#include "common/main_support.h"

int main(int argc, char** argv) {
  llmc::config::WorkerConfig config;
  const llmc::config::ProgramInfo program{"llmc-worker", "worker", "runs a model and streams tokens over gRPC"};
  if (auto exit_code = llmc::LoadConfigOrExit(program, argc, argv, config)) return *exit_code;
  std::cerr << "llmc-worker: model serving is not implemented yet; this build only checks its configuration\n";
  return 1;
}
