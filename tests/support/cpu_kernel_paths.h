#ifndef LLMC_TESTS_SUPPORT_CPU_KERNEL_PATHS_H_
#define LLMC_TESTS_SUPPORT_CPU_KERNEL_PATHS_H_

#include "tests/support/catch.h"
#include "worker/model/cpu/cpu_isa.h"

namespace llmc::testing {

// Runs fn once on every CPU kernel path this machine has (portable up to the detected best), each forced in
// turn; the path is restored afterwards even when a check throws.
template <typename Fn>
void ForEachCpuKernelPath(Fn&& fn) {
  using model::cpu::CpuIsa;
  struct Reset {
    ~Reset() { model::cpu::ResetCpuIsa(); }
  } reset;
  for (int isa = 0; isa <= static_cast<int>(model::cpu::DetectedCpuIsa()); ++isa) {
    REQUIRE(model::cpu::ForceCpuIsa(static_cast<CpuIsa>(isa)).ok());
    INFO("kernel path " << model::cpu::CpuIsaName(static_cast<CpuIsa>(isa)));
    fn();
  }
}

}  // namespace llmc::testing

#endif  // LLMC_TESTS_SUPPORT_CPU_KERNEL_PATHS_H_
