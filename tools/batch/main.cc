// llmc-batch: offline generation without a cluster, in the spirit of vLLM's run-batch.
#include <iostream>
#include <string>
#include <vector>

#include "tools/batch/batch_cli.h"

int main(int argc, char** argv) {
  return llmc::batch::BatchMain(std::vector<std::string>(argv + 1, argv + argc), std::cout, std::cerr);
}
