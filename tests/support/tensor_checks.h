#ifndef LLMC_TESTS_SUPPORT_TENSOR_CHECKS_H_
#define LLMC_TESTS_SUPPORT_TENSOR_CHECKS_H_

#include <ATen/ATen.h>

#include <algorithm>
#include <vector>

namespace llmc::testing {

// Largest difference relative to the reference's largest magnitude (at least 1).
inline double RelativeError(const at::Tensor& actual, const at::Tensor& expected) {
  const double scale = std::max(1.0, expected.abs().max().item<double>());
  return (actual.to(at::kFloat) - expected.to(at::kFloat)).abs().max().item<double>() / scale;
}

// Normal values times `scale`, drawn in float32 and converted to `dtype`.
inline at::Tensor Random(std::vector<int64_t> sizes, at::ScalarType dtype, double scale = 1.0) {
  return (at::randn(sizes, at::kFloat) * scale).to(dtype);
}

}  // namespace llmc::testing

#endif  // LLMC_TESTS_SUPPORT_TENSOR_CHECKS_H_
