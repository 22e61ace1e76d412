#ifndef LLMC_TESTS_SUPPORT_INT4_REQUANTIZED_H_
#define LLMC_TESTS_SUPPORT_INT4_REQUANTIZED_H_

// What int4 batches on AMX-INT8 tiles multiply once their weight is requantized to int8 (int4_requantize.h): the
// weight as float32 [n, k] from its packed panels (columns in packed order) through the portable requantization, and
// the activations rounded to bytes with one scale per row. For tests' expected values.
#include <ATen/ATen.h>

#include <cstdint>

namespace llmc::testing {

// `packed` and its scales as the operators take them (with zero points: [2, panels, groups, 64]).
at::Tensor RequantizedInt4Matrix(const at::Tensor& packed, const at::Tensor& scales, int64_t n, int64_t k);
// Each row of x at 127 levels of its largest magnitude (times the scale's float32 inverse, rounded half to even,
// as the quantizer does; a row longer than kMaxInt8ActivationGroup in pieces of that many), back in float32.
at::Tensor RowWideByteQuantized(const at::Tensor& x);

}  // namespace llmc::testing

#endif  // LLMC_TESTS_SUPPORT_INT4_REQUANTIZED_H_
