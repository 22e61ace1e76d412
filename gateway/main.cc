// llmc-gateway: the OpenAI-compatible REST and SSE front end.
#include "common/config/gateway_config.h"
#include "common/logging.h"
#include "common/main_support.h"
#include "common/shutdown.h"
#include "gateway/gateway_server.h"

int main(int argc, char** argv) {
  llmc::ShutdownSignal shutdown;
  llmc::config::GatewayConfig config;
  const llmc::config::ProgramInfo program{"llmc-gateway", "gateway", "OpenAI-compatible HTTP API in front of workers"};
  if (auto exit_code = llmc::LoadConfigOrExit(program, argc, argv, config)) return *exit_code;

  llmc::gateway::GatewayServer server(config);
  if (absl::Status status = server.Start(); !status.ok()) {
    LLMC_LOG(Error) << status.message();
    return 1;
  }
  shutdown.Wait();
  server.Drain();
  return 0;
}
