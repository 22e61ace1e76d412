#include "worker/model/step_inputs.h"

#include <cstring>

namespace llmc::model {
namespace {

constexpr int64_t kAlignment = 8;  // every part starts where any of their dtypes may be viewed

int64_t Aligned(int64_t bytes) { return (bytes + kAlignment - 1) / kAlignment * kAlignment; }

}  // namespace

std::vector<at::Tensor> ToDeviceInOneCopy(const std::vector<at::Tensor>& parts, at::Device device, bool pinned) {
  std::vector<int64_t> offsets;
  int64_t total = 0;
  for (const at::Tensor& part : parts) {
    TORCH_CHECK(part.device().is_cpu() && part.is_contiguous(), "ToDeviceInOneCopy: needs contiguous host tensors");
    offsets.push_back(total);
    total += Aligned(part.nbytes());
  }
  at::Tensor host = at::empty({total}, at::TensorOptions().dtype(at::kByte).pinned_memory(pinned));
  auto* bytes = host.data_ptr<uint8_t>();
  for (size_t i = 0; i < parts.size(); ++i) {
    if (parts[i].nbytes() > 0) std::memcpy(bytes + offsets[i], parts[i].data_ptr(), parts[i].nbytes());
  }
  const at::Tensor on_device = host.to(device, /*non_blocking=*/pinned);
  std::vector<at::Tensor> out;
  out.reserve(parts.size());
  for (size_t i = 0; i < parts.size(); ++i) {
    const at::Tensor& part = parts[i];
    out.push_back(on_device.narrow(0, offsets[i], static_cast<int64_t>(part.nbytes()))
                      .view(part.scalar_type())
                      .view(part.sizes()));
  }
  return out;
}

}  // namespace llmc::model
