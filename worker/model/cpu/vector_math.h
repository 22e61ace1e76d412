#ifndef LLMC_WORKER_MODEL_CPU_VECTOR_MATH_H_
#define LLMC_WORKER_MODEL_CPU_VECTOR_MATH_H_

// Branch-free float math the compiler vectorizes with whatever instruction set the including file is built
// for (std::exp is a scalar library call in a loop).
#include <cstdint>
#include <cstring>

namespace llmc::model::cpu {
// Per translation unit (see attention_kernel.h): each instruction-set file keeps its own vectorized copy.
namespace {

// e^x to about 2e-7 relative for x in [-87, 88] (below: ~1e-38, not 0): 2^(x log2 e) split into an integer
// power, placed in the exponent bits, and a fraction in [-0.5, 0.5] by a degree-6 polynomial.
inline float FastExp(float x) {
  x = x < -87.0f ? -87.0f : (x > 88.0f ? 88.0f : x);
  const float t = x * 1.44269504088896341f;
  constexpr float kRound = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
  const float whole = (t + kRound) - kRound;
  const float f = t - whole;
  float p = 1.5252733804059840e-5f;
  p = p * f + 1.5403530393381609e-4f;
  p = p * f + 1.3333558146428443e-3f;
  p = p * f + 9.6181291076284772e-3f;
  p = p * f + 5.5504108664821580e-2f;
  p = p * f + 2.4022650695910071e-1f;
  p = p * f + 6.9314718055994531e-1f;
  p = p * f + 1.0f;
  const int32_t bits = (static_cast<int32_t>(whole) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof(scale));
  return p * scale;
}

// The bits of bfloat16(value), rounded to nearest even as c10::BFloat16 rounds (NaN becomes 0x7FC0), without a
// branch, so that a row of them vectorizes (c10's conversion, a branch and a call per value, does not).
inline uint16_t RoundToBf16Bits(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  const uint16_t rounded = static_cast<uint16_t>((bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16);
  return value != value ? uint16_t{0x7FC0} : rounded;
}

inline float Bf16BitsToFloat(uint16_t half) {
  const uint32_t bits = static_cast<uint32_t>(half) << 16;
  float value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}

// dst[j] = bfloat16(src[j])
inline void RoundRowToBf16(const float* src, uint16_t* dst, int64_t count) {
  for (int64_t j = 0; j < count; ++j) dst[j] = RoundToBf16Bits(src[j]);
}

// dst[j] = bfloat16(float(residual[j]) + values[j]): a residual stream's add, rounded once.
inline void AddRowToBf16(const uint16_t* residual, const float* values, uint16_t* dst, int64_t count) {
  for (int64_t j = 0; j < count; ++j) dst[j] = RoundToBf16Bits(Bf16BitsToFloat(residual[j]) + values[j]);
}

// out[j] = SiLU(gate[j]) * up[j]
inline void SiluMul(const float* gate, const float* up, float* out, int64_t count) {
  for (int64_t j = 0; j < count; ++j) out[j] = gate[j] / (1.0f + FastExp(-gate[j])) * up[j];
}

// out[j] = GELU(gate[j]) * up[j] with GELU's tanh form, 0.5 x (1 + tanh(u)), u = sqrt(2 / pi) (x + 0.044715 x^3);
// 0.5 (1 + tanh(u)) is the logistic function of 2u, so it takes one FastExp like SiLU.
inline void GeluTanhMul(const float* gate, const float* up, float* out, int64_t count) {
  constexpr float kTwoSqrtTwoOverPi = 1.5957691216057308f;
  for (int64_t j = 0; j < count; ++j) {
    const float x = gate[j];
    const float two_u = kTwoSqrtTwoOverPi * (x + 0.044715f * x * x * x);
    out[j] = x / (1.0f + FastExp(-two_u)) * up[j];
  }
}

}  // namespace
}  // namespace llmc::model::cpu

#endif  // LLMC_WORKER_MODEL_CPU_VECTOR_MATH_H_
