// The torch-facing int8 CUDA operator (worker/model/int8_linear_cuda.h) as a Python module, so that
// int8_torch_check.py can build it against the CUDA PyTorch of a GPU machine and compare it with torch.
#include <torch/extension.h>

#include "worker/model/int8_linear_cuda.h"

PYBIND11_MODULE(TORCH_EXTENSION_NAME, module) {
  module.def("applies", &llmc::model::Int8LinearCudaApplies);
  module.def("streams", &llmc::model::Int8LinearCudaStreamsWeights);
  module.def("dequantize", [](const at::Tensor& weight, const at::Tensor& scales, bool to_bf16) {
    return llmc::model::DequantizeInt8Cuda(weight, scales, to_bf16 ? at::kBFloat16 : at::kFloat);
  });
  module.def(
      "linear",
      [](const at::Tensor& x, const at::Tensor& weight, const at::Tensor& scales, c10::optional<at::Tensor> bias) {
        return llmc::model::Int8LinearCuda(x, weight, scales, bias);
      },
      pybind11::arg("x"), pybind11::arg("weight"), pybind11::arg("scales"), pybind11::arg("bias") = pybind11::none());
}
