// The KV block allocator: reference counts, the prefix cache's registry and its least-recently-freed
// eviction.
#include "worker/engine/block_allocator.h"

#include <catch2/catch.hpp>
#include <vector>

namespace llmc::engine {
namespace {

const std::vector<int32_t> kTokensA = {1, 2, 3, 4};
const std::vector<int32_t> kTokensB = {5, 6, 7, 8};

TEST_CASE("block allocator: blocks are counted, shared through the cache and freed with their last holder",
          "[unit][engine]") {
  BlockAllocator allocator(4);
  std::vector<int32_t> first;
  REQUIRE(allocator.Allocate(2, first));
  CHECK(allocator.num_free() == 2);
  CHECK_FALSE(allocator.Allocate(3, first));  // nothing taken
  CHECK(first.size() == 2);

  const uint64_t hash_a = BlockHash(kRootBlockHash, kTokensA);
  const uint64_t hash_b = BlockHash(hash_a, kTokensB);
  CHECK(hash_a != BlockHash(kRootBlockHash, kTokensB));
  CHECK(hash_b != BlockHash(kRootBlockHash, kTokensB));  // the chain: the same block after another prefix
  allocator.Cache(first[0], hash_a, kRootBlockHash, kTokensA);
  allocator.Cache(first[1], hash_b, hash_a, kTokensB);
  CHECK(allocator.num_cached() == 2);

  // A second holder of the same prefix.
  std::vector<int32_t> second;
  auto block = allocator.TakeCached(hash_a, kRootBlockHash, kTokensA);
  REQUIRE(block.has_value());
  CHECK(*block == first[0]);
  second.push_back(*block);
  CHECK(allocator.num_free() == 2);
  // The same hash with other tokens or another parent is a miss, never a wrong block.
  CHECK_FALSE(allocator.TakeCached(hash_b, hash_a, kTokensA).has_value());
  CHECK_FALSE(allocator.TakeCached(hash_b, kRootBlockHash, kTokensB).has_value());
  CHECK_FALSE(allocator.TakeCached(12345, kRootBlockHash, kTokensA).has_value());

  allocator.Release(first);
  CHECK(allocator.num_free() == 3);  // first[1] is free (and still cached); first[0] is held by `second`
  allocator.Release(second);
  CHECK(allocator.num_free() == 4);
  CHECK(allocator.num_cached() == 2);

  // A free cached block comes back from the cache...
  block = allocator.TakeCached(hash_b, hash_a, kTokensB);
  REQUIRE(block.has_value());
  CHECK(allocator.num_free() == 3);
  std::vector<int32_t> holder = {*block};
  allocator.Release(holder);
  // ... and a registered hash is not registered twice.
  std::vector<int32_t> other;
  REQUIRE(allocator.Allocate(1, other));
  allocator.Cache(other[0], hash_a, kRootBlockHash, kTokensA);
  CHECK(allocator.num_cached() == 2);
  allocator.Release(other);
}

TEST_CASE("block allocator: the cache evicts the least recently freed blocks, a sequence's tail first",
          "[unit][engine]") {
  BlockAllocator allocator(4);
  std::vector<int32_t> table;
  REQUIRE(allocator.Allocate(3, table));
  const uint64_t hash_a = BlockHash(kRootBlockHash, kTokensA);
  const uint64_t hash_b = BlockHash(hash_a, kTokensB);
  allocator.Cache(table[0], hash_a, kRootBlockHash, kTokensA);
  allocator.Cache(table[1], hash_b, hash_a, kTokensB);
  allocator.Release(table);  // freed in the order table[2], table[1], table[0]

  // The never-used block goes first, then the tail of the released sequence, and its head last.
  std::vector<int32_t> taken;
  REQUIRE(allocator.Allocate(1, taken));
  CHECK(allocator.num_evicted() == 0);
  REQUIRE(allocator.Allocate(2, taken));
  CHECK(allocator.num_evicted() == 1);
  CHECK_FALSE(allocator.TakeCached(hash_b, hash_a, kTokensB).has_value());
  REQUIRE(allocator.TakeCached(hash_a, kRootBlockHash, kTokensA).has_value());
  CHECK(allocator.num_free() == 0);
}

}  // namespace
}  // namespace llmc::engine
