#ifndef LLMC_WORKER_MODEL_CPU_CPU_ISA_H_
#define LLMC_WORKER_MODEL_CPU_CPU_ISA_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"

namespace llmc::model::cpu {

// The instruction-set paths of the CPU kernels, slowest first. Each is a superset of the one before on the
// CPUs that have it: kAvx2 needs AVX2 and FMA; kAvx512Vnni needs AVX512F/BW/VL and AVX512_VNNI (Ice Lake and
// Cascade Lake Xeons): the int8 and 4-bit weight kernels and the activation quantizer run on AVX512 there, the
// bfloat16 and float kernels on AVX2; kAvx512Bf16 needs AVX512_BF16 as well (every kernel on AVX512); kAmx needs
// those plus AMX-TILE, AMX-BF16 and AVX512_VBMI, and the kernel's permission to use the tile registers.
enum class CpuIsa { kPortable = 0, kAvx2 = 1, kAvx512Vnni = 2, kAvx512Bf16 = 3, kAmx = 4 };

const char* CpuIsaName(CpuIsa isa);
// "portable", "avx2", "avx512_vnni", "avx512_bf16", "amx"; INVALID_ARGUMENT otherwise.
absl::Status ParseCpuIsa(std::string_view name, CpuIsa* isa);

// The best path this CPU (and, for AMX, the operating system) supports. Computed once.
CpuIsa DetectedCpuIsa();

// The path the kernels take: the detected one, or a lower one forced by the LLMC_CPU_ISA environment variable
// (read once) or by ForceCpuIsa. Forcing a path the CPU lacks is refused.
CpuIsa ActiveCpuIsa();
absl::Status ForceCpuIsa(CpuIsa isa);
// Back to the detected path (or the environment's).
void ResetCpuIsa();

// Whether the active path is kAmx and the CPU has AMX-INT8 as well (int8 tile products, for W8A8).
bool HasAmxInt8();

// How far the 4-bit decode kernels (int4 W4A16 and W4A8, MXFP4) prefetch their weight lines ahead of use: into
// L1 (prefetcht0) or only as far as L2 (prefetcht2). Streamed from memory on an Intel Xeon with AMX, those kernels
// ran 10-25 % faster with kToL2 (docs/performance.md); the AMD EPYC parts were tuned and measured with kToL1. So
// Intel CPUs take kToL2 and the others kToL1, unless LLMC_WEIGHT_PREFETCH=l1|l2 (read once) or
// ForceWeightPrefetch says otherwise. The results do not depend on it.
enum class WeightPrefetch { kToL1 = 0, kToL2 = 1 };
const char* WeightPrefetchName(WeightPrefetch prefetch);  // "l1", "l2"
// INVALID_ARGUMENT for anything but "l1" and "l2".
absl::Status ParseWeightPrefetch(std::string_view name, WeightPrefetch* prefetch);
// This CPU's vendor's choice, before the environment.
WeightPrefetch VendorWeightPrefetch();
WeightPrefetch ActiveWeightPrefetch();
void ForceWeightPrefetch(WeightPrefetch prefetch);
// Back to the vendor's choice (or the environment's).
void ResetWeightPrefetch();

// What is wrong with LLMC_CPU_ISA and LLMC_WEIGHT_PREFETCH as set now (an unknown name, a path this CPU lacks), one
// message each, naming the variable and what is used instead; empty when both are unset or fine. The worker logs
// them at start-up.
std::vector<std::string> KernelEnvironmentProblems();

// One line naming the CPU and the path, for logs and benchmark headers.
std::string DescribeCpu();

}  // namespace llmc::model::cpu

#endif  // LLMC_WORKER_MODEL_CPU_CPU_ISA_H_
