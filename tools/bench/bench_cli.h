#ifndef LLMC_TOOLS_BENCH_BENCH_CLI_H_
#define LLMC_TOOLS_BENCH_BENCH_CLI_H_

#include <ostream>
#include <string>
#include <vector>

#include "tools/bench/bench_config.h"

namespace llmc::bench {

// llmc-bench's command line, without the program name:
//   [run] --flag=value ...                     run a benchmark (see --help)
//   compare [--markdown] A.json B.json ...     side-by-side table of result files
//   plot --output=FILE.svg [--title=T] R.json ...  SVG plot of result files against concurrency
// Results and tables go to `out`, progress and errors to `err`. Returns the process exit code.
int BenchMain(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

// Runs one benchmark with a validated configuration. Exit code 0 when at least one request succeeded.
int RunBenchmark(const BenchConfig& config, std::ostream& out, std::ostream& err);

std::string BenchHelp();

}  // namespace llmc::bench

#endif  // LLMC_TOOLS_BENCH_BENCH_CLI_H_
