// A step's index tensors moved to a device in one copy (worker/model/step_inputs.h): on the CPU (unpinned, the
// same code path but the page-locking and the device), the parts come back equal, with their dtypes and shapes, as
// views of one buffer. The [gpu] tests run it on CUDA through every forward.
#include "worker/model/step_inputs.h"

#include <vector>

#include "tests/support/catch.h"

namespace llmc::model {
namespace {

TEST_CASE("step inputs: int64 and int32 parts of any length come back equal from one buffer", "[unit][engine]") {
  const std::vector<at::Tensor> parts = {
      at::arange(5, at::kLong),                                            // token ids
      at::arange(3, at::kInt),                                             // odd byte count: the next part is realigned
      at::arange(12, at::kInt).reshape({3, 4}),                            // block tables
      at::empty({0}, at::kLong),                                           // an empty part
      at::tensor(std::vector<int64_t>{-7, int64_t{1} << 40}, at::kLong)};  // values beyond 32 bits
  const std::vector<at::Tensor> moved = ToDeviceInOneCopy(parts, at::kCPU, /*pinned=*/false);
  REQUIRE(moved.size() == parts.size());
  for (size_t i = 0; i < parts.size(); ++i) {
    INFO("part " << i);
    CHECK(moved[i].scalar_type() == parts[i].scalar_type());
    CHECK(moved[i].sizes() == parts[i].sizes());
    CHECK(at::equal(moved[i], parts[i]));
    if (parts[i].numel() > 0) CHECK(moved[i].data_ptr() != parts[i].data_ptr());  // copied, not aliased
  }
  // One buffer: every part lies in the first part's storage.
  for (const at::Tensor& part : moved) CHECK(part.storage().data() == moved[0].storage().data());
  CHECK_THROWS(ToDeviceInOneCopy({at::arange(6, at::kLong).reshape({2, 3}).t()}, at::kCPU, false));
}

}  // namespace
}  // namespace llmc::model
