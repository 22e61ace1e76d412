#ifndef LLMC_WORKER_MODEL_CPU_ROW_BLOCKS_H_
#define LLMC_WORKER_MODEL_CPU_ROW_BLOCKS_H_

#include <cstdint>

namespace llmc::model::cpu {

// Runs a register-blocked panel kernel over args.rows rows: blocks of six (24 of the 32 AVX512 registers
// hold accumulators), then one block of the 1-5 rows left. Runner<N>::Run(args, m0) computes rows m0..m0+N.
// Each kernel file instantiates it with its own runners, compiled with that file's instruction set.
template <template <int> class Runner, typename Args>
void ForRowBlocks(const Args& args) {
  int64_t m0 = 0;
  for (; m0 + 6 <= args.rows; m0 += 6) Runner<6>::Run(args, m0);
  switch (args.rows - m0) {
    case 5:
      Runner<5>::Run(args, m0);
      break;
    case 4:
      Runner<4>::Run(args, m0);
      break;
    case 3:
      Runner<3>::Run(args, m0);
      break;
    case 2:
      Runner<2>::Run(args, m0);
      break;
    case 1:
      Runner<1>::Run(args, m0);
      break;
    default:
      break;
  }
}

}  // namespace llmc::model::cpu

#endif  // LLMC_WORKER_MODEL_CPU_ROW_BLOCKS_H_
