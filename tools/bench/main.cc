// llmc-bench: a load generator for OpenAI-compatible endpoints, with compare and plot subcommands.
#include <iostream>
#include <string>
#include <vector>

#include "tools/bench/bench_cli.h"

int main(int argc, char** argv) {
  return llmc::bench::BenchMain(std::vector<std::string>(argv + 1, argv + argc), std::cout, std::cerr);
}
