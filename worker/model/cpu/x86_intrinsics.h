#ifndef LLMC_WORKER_MODEL_CPU_X86_INTRINSICS_H_
#define LLMC_WORKER_MODEL_CPU_X86_INTRINSICS_H_

// <immintrin.h> for the per-instruction-set kernel files. GCC 12 reports its own _mm*_undefined_* placeholders
// as uninitialized once inlined (GCC bug 105593), which -Werror would turn into a build failure.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop
#else
#include <immintrin.h>
#endif

#endif  // LLMC_WORKER_MODEL_CPU_X86_INTRINSICS_H_
