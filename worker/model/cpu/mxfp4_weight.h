#ifndef LLMC_WORKER_MODEL_CPU_MXFP4_WEIGHT_H_
#define LLMC_WORKER_MODEL_CPU_MXFP4_WEIGHT_H_

// MXFP4 weights (OCP microscaling FP4; GPT-OSS's experts), kept 4-bit: an E2M1 code per weight (bits 0-2 index
// the magnitudes 0, 0.5, 1, 1.5, 2, 3, 4, 6; bit 3 is the sign) and an E8M0 exponent e per 32 inputs:
// W[n, k] = E2M1(code) * 2^(e - 127).
//
// In a package a matrix [N, K] is uint8 [N, K / 2] (input 2i in the low nibble, as int4's) beside uint8
// exponents [N, K / 32]; the scales' dtype (uint8, not float32) is what tells MXFP4 from int4 everywhere. Packed,
// the codes take int4's panels unchanged (PackInt4Weight: each nibble stored as code ^ 8) and the exponents
// PackMxfp4Scales' [panels, K / 32, kPanelWidth] bytes. The kernels read every packed nibble through a table of
// twice its value, 2 * E2M1 in -12..12 (integers), and scale by 2^(e - 128).
#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

namespace llmc::model::cpu {

constexpr int64_t kMxfp4GroupSize = 32;

// Twice the value of each packed nibble (code ^ 8): the integers the kernels multiply.
extern const int8_t kMxfp4DoubledValues[16];
// 2^(e - 128): the scale of the doubled values (e of 255, NaN in the format, is refused at load).
float Mxfp4HalfScale(uint8_t exponent);

// Whether `scales` (unpacked [N, G] or packed [panels, G, kPanelWidth]) are MXFP4 exponents.
inline bool IsMxfp4Scales(const at::Tensor& scales) { return scales.defined() && scales.scalar_type() == at::kByte; }
// The package's exponents [N, K / 32] in the packed weight's column order (`column_order` as PackWeight's).
at::Tensor PackMxfp4Scales(const at::Tensor& exponents, const std::vector<int64_t>& column_order = {});
bool IsPackedMxfp4Scales(const at::Tensor& scales, const at::Tensor& packed);

// One packed MXFP4 panel (exponents [weight_groups][kPanelWidth]) as a plain kernels' panel in `dtype`
// (float32, exact, or bfloat16, rounded to nearest even), in a buffer of the calling thread until its next call.
const void* DequantizeMxfp4Panel(const uint8_t* panel, const uint8_t* exponents, int64_t weight_groups,
                                 int64_t k_padded, at::ScalarType dtype);

// A package's matrix (codes and exponents) as float32 [N, K]: the format's definition (tests, the composite).
at::Tensor DequantizeMxfp4(const at::Tensor& codes, const at::Tensor& exponents);

}  // namespace llmc::model::cpu

#endif  // LLMC_WORKER_MODEL_CPU_MXFP4_WEIGHT_H_
