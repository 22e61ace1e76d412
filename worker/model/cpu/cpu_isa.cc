#include "worker/model/cpu/cpu_isa.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <fstream>

#include "absl/strings/str_cat.h"

namespace llmc::model::cpu {
namespace {

#if defined(__x86_64__)
// Linux keeps the AMX tile data state off until a process asks for it (arch_prctl, Linux 5.16+); a kernel or
// hypervisor that refuses means no AMX, whatever CPUID says.
bool RequestAmxPermission() {
  constexpr int kArchGetXcompPerm = 0x1022, kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
  if (syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) != 0) return false;
  unsigned long features = 0;
  if (syscall(SYS_arch_prctl, kArchGetXcompPerm, &features) != 0) return false;
  return (features & (1ul << kXfeatureXtiledata)) != 0;
}

// GCC 12's __builtin_cpu_supports has no AMX names: CPUID leaf 7, EDX bits 22 (AMX-BF16), 24 (AMX-TILE) and
// 25 (AMX-INT8).
constexpr unsigned kAmxBf16 = 1u << 22, kAmxTile = 1u << 24, kAmxInt8 = 1u << 25;
unsigned AmxFeatureBits() {
  unsigned eax = 7, ebx = 0, ecx = 0, edx = 0;
  __asm__ volatile("cpuid" : "+a"(eax), "=b"(ebx), "+c"(ecx), "=d"(edx));
  return edx;
}

CpuIsa Detect() {
  __builtin_cpu_init();
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  const bool avx512_vnni = avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni");
  if (!avx2) return CpuIsa::kPortable;
  if (!avx512_vnni) return CpuIsa::kAvx2;
  if (!__builtin_cpu_supports("avx512bf16")) return CpuIsa::kAvx512Vnni;
  // VBMI as well: panel_kernels_amx.cc is compiled with it (its int4 requantization looks values up with vpermi2b),
  // and every CPU with AMX has it.
  const bool amx_cpu =
      (AmxFeatureBits() & kAmxBf16) != 0 && (AmxFeatureBits() & kAmxTile) != 0 && __builtin_cpu_supports("avx512vbmi");
  if (amx_cpu && RequestAmxPermission()) return CpuIsa::kAmx;
  return CpuIsa::kAvx512Bf16;
}
#else
CpuIsa Detect() { return CpuIsa::kPortable; }
#endif

// The variable's value, or null when it is unset or empty.
const char* SetVariable(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? value : nullptr;
}

CpuIsa EnvironmentOrDetected() {
  const CpuIsa detected = DetectedCpuIsa();
  const char* forced = SetVariable("LLMC_CPU_ISA");
  if (forced == nullptr) return detected;
  CpuIsa isa;
  if (!ParseCpuIsa(forced, &isa).ok() || static_cast<int>(isa) > static_cast<int>(detected)) return detected;
  return isa;
}

std::atomic<int>& Active() {
  static std::atomic<int> active{static_cast<int>(EnvironmentOrDetected())};
  return active;
}

// A value that does not parse leaves the vendor's choice (KernelEnvironmentProblems reports it).
WeightPrefetch WeightPrefetchFromEnvironment() {
  WeightPrefetch prefetch = VendorWeightPrefetch();
  if (const char* forced = SetVariable("LLMC_WEIGHT_PREFETCH")) ParseWeightPrefetch(forced, &prefetch).IgnoreError();
  return prefetch;
}

std::atomic<int>& ActivePrefetch() {
  static std::atomic<int> active{static_cast<int>(WeightPrefetchFromEnvironment())};
  return active;
}

}  // namespace

const char* CpuIsaName(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::kPortable:
      return "portable";
    case CpuIsa::kAvx2:
      return "avx2";
    case CpuIsa::kAvx512Vnni:
      return "avx512_vnni";
    case CpuIsa::kAvx512Bf16:
      return "avx512_bf16";
    case CpuIsa::kAmx:
      return "amx";
  }
  return "unknown";
}

absl::Status ParseCpuIsa(std::string_view name, CpuIsa* isa) {
  for (const CpuIsa candidate :
       {CpuIsa::kPortable, CpuIsa::kAvx2, CpuIsa::kAvx512Vnni, CpuIsa::kAvx512Bf16, CpuIsa::kAmx}) {
    if (name == CpuIsaName(candidate)) {
      *isa = candidate;
      return absl::OkStatus();
    }
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown CPU kernel path '", std::string(name),
                                                 "' (portable, avx2, avx512_vnni, avx512_bf16, amx)"));
}

CpuIsa DetectedCpuIsa() {
  static const CpuIsa detected = Detect();
  return detected;
}

CpuIsa ActiveCpuIsa() { return static_cast<CpuIsa>(Active().load(std::memory_order_relaxed)); }

absl::Status ForceCpuIsa(CpuIsa isa) {
  if (static_cast<int>(isa) > static_cast<int>(DetectedCpuIsa())) {
    return absl::FailedPreconditionError(absl::StrCat(
        "CPU kernel path '", CpuIsaName(isa), "' is not available here (best: ", CpuIsaName(DetectedCpuIsa()), ")"));
  }
  Active().store(static_cast<int>(isa));
  return absl::OkStatus();
}

void ResetCpuIsa() { Active().store(static_cast<int>(EnvironmentOrDetected())); }

bool HasAmxInt8() {
#if defined(__x86_64__)
  // kAmx is only ever active when detected, so the tile permission is granted.
  static const bool amx_int8 = DetectedCpuIsa() == CpuIsa::kAmx && (AmxFeatureBits() & kAmxInt8) != 0;
  return amx_int8 && ActiveCpuIsa() == CpuIsa::kAmx;
#else
  return false;
#endif
}

const char* WeightPrefetchName(WeightPrefetch prefetch) { return prefetch == WeightPrefetch::kToL2 ? "l2" : "l1"; }

absl::Status ParseWeightPrefetch(std::string_view name, WeightPrefetch* prefetch) {
  for (const WeightPrefetch candidate : {WeightPrefetch::kToL1, WeightPrefetch::kToL2}) {
    if (name == WeightPrefetchName(candidate)) {
      *prefetch = candidate;
      return absl::OkStatus();
    }
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown weight prefetch '", std::string(name), "' (l1, l2)"));
}

WeightPrefetch VendorWeightPrefetch() {
#if defined(__x86_64__)
  static const WeightPrefetch vendor = [] {
    __builtin_cpu_init();
    return __builtin_cpu_is("intel") ? WeightPrefetch::kToL2 : WeightPrefetch::kToL1;
  }();
  return vendor;
#else
  return WeightPrefetch::kToL1;
#endif
}

WeightPrefetch ActiveWeightPrefetch() {
  return static_cast<WeightPrefetch>(ActivePrefetch().load(std::memory_order_relaxed));
}

void ForceWeightPrefetch(WeightPrefetch prefetch) { ActivePrefetch().store(static_cast<int>(prefetch)); }

void ResetWeightPrefetch() { ActivePrefetch().store(static_cast<int>(WeightPrefetchFromEnvironment())); }

std::vector<std::string> KernelEnvironmentProblems() {
  std::vector<std::string> problems;
  if (const char* isa_name = SetVariable("LLMC_CPU_ISA")) {
    CpuIsa isa;
    const absl::Status parsed = ParseCpuIsa(isa_name, &isa);
    if (!parsed.ok()) {
      problems.push_back(absl::StrCat("LLMC_CPU_ISA: ", parsed.message(), "; using ", CpuIsaName(ActiveCpuIsa())));
    } else if (static_cast<int>(isa) > static_cast<int>(DetectedCpuIsa())) {
      problems.push_back(
          absl::StrCat("LLMC_CPU_ISA: '", isa_name, "' is not available here; using ", CpuIsaName(ActiveCpuIsa())));
    }
  }
  if (const char* prefetch_name = SetVariable("LLMC_WEIGHT_PREFETCH")) {
    WeightPrefetch prefetch;
    const absl::Status parsed = ParseWeightPrefetch(prefetch_name, &prefetch);
    if (!parsed.ok()) {
      problems.push_back(absl::StrCat("LLMC_WEIGHT_PREFETCH: ", parsed.message(), "; using ",
                                      WeightPrefetchName(ActiveWeightPrefetch())));
    }
  }
  return problems;
}

std::string DescribeCpu() {
  std::string model = "unknown CPU";
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);) {
    if (line.rfind("model name", 0) == 0) {
      model = line.substr(line.find(':') + 2);
      break;
    }
  }
  return absl::StrCat(model, "; kernel path ", CpuIsaName(ActiveCpuIsa()), HasAmxInt8() ? " with AMX-INT8" : "",
                      " (best here: ", CpuIsaName(DetectedCpuIsa()), "); 4-bit weights prefetched into ",
                      WeightPrefetchName(ActiveWeightPrefetch()));
}

}  // namespace llmc::model::cpu
