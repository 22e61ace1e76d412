// Built only when libtorch has CUDA (LLMC_WITH_CUDA).
#include "worker/model/dequantized_slices_cuda.h"

#include <algorithm>

namespace llmc::model {
namespace {

// Weights dequantized at a time (or 64 columns, where K is larger still): 64 MB as bfloat16. Llama-3's LM head
// is 525 M weights.
constexpr int64_t kDequantizeSliceWeights = int64_t{32} << 20;
// Each slice starts its columns of the output on a 128-byte boundary: on an H100, cuBLAS took 80 us for
// 64 x 896 x 37449 at an odd column offset, where the whole 151936-column product took 109.
constexpr int64_t kSliceColumnMultiple = 64;

}  // namespace

at::Tensor MultiplyDequantizedSlices(const at::Tensor& input, int64_t columns, const at::Tensor& bias,
                                     const DequantizeWeightRows& dequantize_rows) {
  const int64_t k_size = input.size(1);
  const int64_t slice_columns = std::min(
      columns,
      std::max(kSliceColumnMultiple, kDequantizeSliceWeights / k_size / kSliceColumnMultiple * kSliceColumnMultiple));
  at::Tensor out = at::empty({input.size(0), columns}, input.options());
  at::Tensor slice = at::empty({slice_columns, k_size}, input.options());
  for (int64_t first = 0; first < columns; first += slice_columns) {
    const int64_t count = std::min(slice_columns, columns - first);
    dequantize_rows(first, count, slice);
    // cuBLAS writes a column slice of a row-major matrix in place: its leading dimension is the full width.
    at::Tensor out_columns = count == columns ? out : out.narrow(1, first, count);
    if (bias.defined()) {
      at::addmm_out(out_columns, bias.narrow(0, first, count), input, slice.narrow(0, 0, count).t());
    } else {
      at::mm_out(out_columns, input, slice.narrow(0, 0, count).t());
    }
  }
  return out;
}

}  // namespace llmc::model
