#include <iostream>
#include <string>
#include <vector>

#include "tools/sim/sim_cli.h"

int main(int argc, char** argv) {
  return llmc::sim::RunSimCli(std::vector<std::string>(argv + 1, argv + argc), std::cout, std::cerr);
}
