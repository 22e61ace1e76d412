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

// Runs fn once with each placement of the 4-bit kernels' weight prefetches (cpu_isa.h, WeightPrefetch); this
// CPU's placement is restored afterwards even when a check throws.
template <typename Fn>
void ForEachWeightPrefetch(Fn&& fn) {
  using model::cpu::WeightPrefetch;
  struct Reset {
    ~Reset() { model::cpu::ResetWeightPrefetch(); }
  } reset;
  for (const WeightPrefetch prefetch : {WeightPrefetch::kToL1, WeightPrefetch::kToL2}) {
    model::cpu::ForceWeightPrefetch(prefetch);
    INFO("weights prefetched into " << model::cpu::WeightPrefetchName(prefetch));
    fn();
  }
}

}  // namespace llmc::testing

#endif  // LLMC_TESTS_SUPPORT_CPU_KERNEL_PATHS_H_
