#ifndef LLMC_TOOLS_SIM_SIM_CLI_H_
#define LLMC_TOOLS_SIM_SIM_CLI_H_

#include <ostream>
#include <string>
#include <vector>

namespace llmc::sim {

// llmc-sim [--key=value ...]: simulates each --policies policy at each --loads load, prints a table of TTFT
// p50/p99, TPOT, throughput and the prefix cache's share, and with --svg writes the plot. 0 on success, 2
// for bad flags.
int RunSimCli(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace llmc::sim

#endif  // LLMC_TOOLS_SIM_SIM_CLI_H_
