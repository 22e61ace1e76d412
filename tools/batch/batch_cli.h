#ifndef LLMC_TOOLS_BATCH_BATCH_CLI_H_
#define LLMC_TOOLS_BATCH_BATCH_CLI_H_

#include <ostream>
#include <string>
#include <vector>

namespace llmc::batch {

// llmc-batch's command line, without the program name: loads the package, runs every line of --input
// through the engine and writes --output. Returns 0 when every line was answered (some perhaps with an
// error line), 1 when the model or the files cannot be used, 2 for bad flags.
int BatchMain(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace llmc::batch

#endif  // LLMC_TOOLS_BATCH_BATCH_CLI_H_
