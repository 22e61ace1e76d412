// The recycled operator outputs (worker/model/cpu/output_pool.h): a tensor comes back only once nothing else holds
// it or a view of its storage, with the asked sizes and dtype, and only for decode-sized outputs under
// InferenceMode.

#include "worker/model/cpu/output_pool.h"

#include <c10/core/InferenceMode.h>

#include <utility>
// (keep this order: libtorch's headers define glog's CHECK; Catch's, included after, must win)
#include "tests/support/catch.h"

namespace llmc::model::cpu {
namespace {

// Whether the pool kept the tensor's storage once the caller let go of it.
bool KeptAfterRelease(at::Tensor tensor) {
  const c10::weak_intrusive_ptr<c10::StorageImpl> storage = tensor.storage().getWeakStorageImpl();
  tensor = at::Tensor();
  return !storage.expired();
}

TEST_CASE("output pool: a released output comes back, a held one or one with a live view does not",
          "[unit][output_pool]") {
  c10::InferenceMode inference;
  at::Tensor first = RecycledEmpty(kResidualOutput, {1, 904}, at::kBFloat16);
  CHECK(first.is_contiguous());
  CHECK(first.sizes() == at::IntArrayRef({1, 904}));
  CHECK(first.scalar_type() == at::kBFloat16);
  const void* first_data = first.data_ptr();
  // Still held: the next one is another tensor.
  at::Tensor second = RecycledEmpty(kResidualOutput, {1, 904}, at::kBFloat16);
  const void* second_data = second.data_ptr();
  CHECK(second_data != first_data);
  // Only a view of the first is left: it still reads the storage, so the first is not handed out.
  at::Tensor view = first.reshape({904});
  first = at::Tensor();
  second = at::Tensor();
  at::Tensor while_viewed = RecycledEmpty(kResidualOutput, {1, 904}, at::kBFloat16);
  CHECK(while_viewed.data_ptr() == second_data);
  view = at::Tensor();
  at::Tensor after_view = RecycledEmpty(kResidualOutput, {1, 904}, at::kBFloat16);
  CHECK(after_view.data_ptr() == first_data);
}

TEST_CASE("output pool: sizes, dtype and slot must match", "[unit][output_pool]") {
  c10::InferenceMode inference;
  at::Tensor kept = RecycledEmpty(kGatedOutput, {2, 64}, at::kFloat);
  const void* data = kept.data_ptr();
  kept = at::Tensor();
  const at::Tensor other_slot = RecycledEmpty(kQueryOutput, {2, 64}, at::kFloat);
  CHECK(other_slot.data_ptr() != data);
  const at::Tensor other_dtype = RecycledEmpty(kGatedOutput, {2, 64}, at::kBFloat16);
  CHECK(other_dtype.scalar_type() == at::kBFloat16);
  CHECK(other_dtype.data_ptr() != data);
  const at::Tensor other_sizes = RecycledEmpty(kGatedOutput, {4, 32}, at::kFloat);
  CHECK(other_sizes.sizes() == at::IntArrayRef({4, 32}));
  CHECK(other_sizes.scalar_type() == at::kFloat);
}

TEST_CASE("output pool: decode-sized outputs are kept, prefill-sized ones and calls outside InferenceMode are not",
          "[unit][output_pool]") {
  {
    c10::InferenceMode inference;
    CHECK(KeptAfterRelease(RecycledEmpty(kAttentionOutput, {1, 14, 64}, at::kBFloat16)));
    CHECK_FALSE(KeptAfterRelease(RecycledEmpty(kAttentionOutput, {512, 4864}, at::kBFloat16)));
  }
  at::Tensor outside = RecycledEmpty(kAttentionOutput, {3, 14, 64}, at::kBFloat16);
  CHECK(!outside.is_inference());
  CHECK_FALSE(KeptAfterRelease(std::move(outside)));
}

}  // namespace
}  // namespace llmc::model::cpu
