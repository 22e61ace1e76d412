// llmc-controller: the worker registry and dispatcher.
#include "common/config/controller_config.h"
#include "common/logging.h"
#include "common/main_support.h"
#include "common/shutdown.h"
#include "controller/controller_server.h"

int main(int argc, char** argv) {
  llmc::ShutdownSignal shutdown;
  llmc::config::ControllerConfig config;
  const llmc::config::ProgramInfo program{"llmc-controller", "controller",
                                          "registry of llmc workers and dispatcher for gateways"};
  if (auto exit_code = llmc::LoadConfigOrExit(program, argc, argv, config)) return *exit_code;

  llmc::controller::ControllerServer server(config);
  if (absl::Status status = server.Start(); !status.ok()) {
    LLMC_LOG(Error) << status.message();
    return 1;
  }
  shutdown.Wait();
  server.Shutdown();
  return 0;
}
