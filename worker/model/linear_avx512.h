#ifndef LLMC_WORKER_MODEL_LINEAR_AVX512_H_
#define LLMC_WORKER_MODEL_LINEAR_AVX512_H_

#include <cstdint>

// Skinny linear layers (few input rows, decode steps) that stream the weight once. Compiled with AVX512
// flags in their own file, which therefore includes no ATen or standard-library headers: an inline
// function instantiated there could be picked by the linker for callers on CPUs without AVX512. Call
// these only after checking the CPU (linear_cpu.cc does).
namespace llmc::model::avx512 {

// output[i, j] = sum_k input[i, k] * weight[j, k] (+ bias[j]), accumulated in float32.
struct SkinnyLinearArgs {
  const void* input;  // [m, k], rows input_stride elements apart, unit stride within a row
  int64_t input_stride;
  const void* weight;  // [n, k] contiguous
  const void* bias;    // [n] contiguous, or null
  void* output;        // [m, n], rows output_stride elements apart, unit stride within a row
  int64_t output_stride;
  int64_t m, n, k;
};

// Output columns [n_begin, n_end) for all m rows: weight rows n_begin .. n_end - 1, read once, in order.
// bfloat16 everywhere (needs AVX512F, AVX512BW and AVX512_BF16); the result is rounded to nearest even.
void SkinnyLinearBf16(const SkinnyLinearArgs& args, int64_t n_begin, int64_t n_end);
// float32 everywhere (needs AVX512F).
void SkinnyLinearFloat(const SkinnyLinearArgs& args, int64_t n_begin, int64_t n_end);

}  // namespace llmc::model::avx512

#endif  // LLMC_WORKER_MODEL_LINEAR_AVX512_H_
