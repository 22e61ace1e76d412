// The huge-page arena that holds the packed weights and the KV cache: distinct, aligned tensors, a fallback
// when it is full, memory that outlives the arena's last pointer, and the packed weights placed in it.
// libtorch's headers define glog's CHECK; Catch's, included after, must win.
#include "worker/model/cpu/huge_page_arena.h"

#include "worker/model/cpu/packed_weight.h"
// (keep this order)
#include <cstdint>
#include <memory>
#include <vector>

#include "tests/support/catch.h"

namespace llmc::model::cpu {
namespace {

uintptr_t Address(const at::Tensor& tensor) { return reinterpret_cast<uintptr_t>(tensor.data_ptr()); }

bool Inside(const at::Tensor& tensor, uintptr_t begin, size_t bytes) {
  return Address(tensor) >= begin && Address(tensor) + tensor.nbytes() <= begin + bytes;
}

TEST_CASE("huge page arena: tensors are distinct, page-aligned and writable", "[unit][arena]") {
  const std::shared_ptr<HugePageArena> arena = HugePageArena::Create(3 << 20);
  CHECK(arena->capacity() == (4 << 20));  // whole huge pages
  CHECK(HugePageArena::TensorBytes(1) == 4096);
  CHECK(HugePageArena::TensorBytes(8192) == 8192);
  at::Tensor a = arena->Empty({1000}, at::kFloat);
  at::Tensor b = arena->Empty({3, 5}, at::kBFloat16);
  at::Tensor c = arena->Empty({7}, at::kChar);
  CHECK(arena->used() == 4096 + 4096 + 4096);
  CHECK(a.scalar_type() == at::kFloat);
  CHECK(b.sizes() == at::IntArrayRef({3, 5}));
  CHECK(b.is_contiguous());
  const uintptr_t begin = Address(a);
  CHECK(begin % (2 << 20) == 0);  // the first starts on a huge-page boundary
  for (const at::Tensor* t : {&a, &b, &c}) {
    CHECK(Address(*t) % 4096 == 0);
    CHECK(Inside(*t, begin, arena->capacity()));
  }
  CHECK(Address(b) >= Address(a) + a.nbytes());
  CHECK(Address(c) >= Address(b) + b.nbytes());
  a.fill_(1.5);
  b.fill_(-2);
  c.fill_(3);
  CHECK(a.sum().item<double>() == 1500.0);
  CHECK(b.to(at::kFloat).sum().item<double>() == -30.0);
  CHECK(c.sum().item<int64_t>() == 21);
}

TEST_CASE("huge page arena: a tensor beyond the room left comes from the ordinary allocator", "[unit][arena]") {
  const std::shared_ptr<HugePageArena> arena = HugePageArena::Create(2 << 20);
  const uintptr_t begin = Address(arena->Empty({1 << 19}, at::kFloat));  // all 2 MiB
  at::Tensor overflow = arena->Empty({16, 16}, at::kFloat);
  CHECK_FALSE(Inside(overflow, begin, arena->capacity()));
  overflow.fill_(2);
  CHECK(overflow.sum().item<double>() == 512.0);
}

TEST_CASE("huge page arena: its tensors keep the memory mapped after the arena's last pointer goes", "[unit][arena]") {
  at::Tensor survivor;
  {
    const std::shared_ptr<HugePageArena> arena = HugePageArena::Create(1 << 20);
    survivor = arena->Empty({256, 256}, at::kFloat).fill_(0.25);
  }
  CHECK(survivor.sum().item<double>() == 256.0 * 256 * 0.25);
  const at::Tensor alone = EmptyOnHugePages({5, 7}, at::kBFloat16).zero_();
  CHECK(alone.sizes() == at::IntArrayRef({5, 7}));
  CHECK(alone.to(at::kFloat).abs().sum().item<double>() == 0.0);
}

TEST_CASE("huge page arena: packed weights fill it exactly and equal those packed elsewhere", "[unit][arena]") {
  at::manual_seed(5);
  const at::Tensor bf16 = at::randn({70, 130}).to(at::kBFloat16);
  const at::Tensor int8 = at::randint(-127, 128, {33, 200}, at::TensorOptions().dtype(at::kChar));
  const std::vector<int64_t> order = {4, -1, 0, 2};
  const size_t bytes = HugePageArena::TensorBytes(static_cast<size_t>(PackedWeightBytes(bf16))) +
                       HugePageArena::TensorBytes(static_cast<size_t>(PackedWeightBytes(int8, order)));
  const std::shared_ptr<HugePageArena> arena = HugePageArena::Create(bytes);
  const at::Tensor packed_bf16 = PackWeight(bf16, {}, arena.get());
  const at::Tensor packed_int8 = PackWeight(int8, order, arena.get());
  CHECK(static_cast<int64_t>(packed_bf16.nbytes()) == PackedWeightBytes(bf16));
  CHECK(static_cast<int64_t>(packed_int8.nbytes()) == PackedWeightBytes(int8, order));
  const uintptr_t begin = Address(packed_bf16);
  CHECK(Inside(packed_int8, begin, arena->capacity()));
  CHECK(arena->used() == bytes);  // both in the arena, none fell back
  CHECK(at::equal(packed_bf16, PackWeight(bf16)));
  CHECK(at::equal(packed_int8, PackWeight(int8, order)));
}

}  // namespace
}  // namespace llmc::model::cpu
