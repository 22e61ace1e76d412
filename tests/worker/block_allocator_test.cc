// The KV block allocator: reference counts, the prefix cache's registry (blocks found by a chained hash and
// checked by identity: parent block, salt, tokens) and its least-recently-freed eviction.
#include "worker/engine/block_allocator.h"

#include <vector>

#include "tests/support/catch.h"

namespace llmc::engine {
namespace {

const std::vector<int32_t> kTokensA = {1, 2, 3, 4};
const std::vector<int32_t> kTokensB = {5, 6, 7, 8};

// The chained hash of a prompt's first block.
uint64_t First(const std::vector<int32_t>& tokens, absl::string_view salt = "") {
  return BlockHash(RootBlockHash(salt), tokens);
}

TEST_CASE("block allocator: blocks are counted, shared through the cache and freed with their last holder",
          "[unit][engine]") {
  BlockAllocator allocator(4);
  std::vector<int32_t> first;
  REQUIRE(allocator.Allocate(2, first));
  CHECK(allocator.num_free() == 2);
  CHECK_FALSE(allocator.Allocate(3, first));  // nothing taken
  CHECK(first.size() == 2);

  const uint64_t hash_a = First(kTokensA);
  const uint64_t hash_b = BlockHash(hash_a, kTokensB);
  CHECK(hash_a != First(kTokensB));
  CHECK(hash_a != First(kTokensA, "tenant"));
  CHECK(hash_b != First(kTokensB));  // the chain: the same block after another prefix
  const BlockId id_a = allocator.Cache(first[0], hash_a, kNoBlockId, "", kTokensA);
  REQUIRE(id_a != kNoBlockId);
  CHECK(allocator.id(first[0]) == id_a);
  const BlockId id_b = allocator.Cache(first[1], hash_b, id_a, "", kTokensB);
  REQUIRE(id_b != kNoBlockId);
  CHECK(id_b != id_a);
  CHECK(allocator.num_cached() == 2);

  // A second holder of the same prefix.
  std::vector<int32_t> second;
  auto block = allocator.TakeCached(hash_a, kNoBlockId, "", kTokensA);
  REQUIRE(block.has_value());
  CHECK(*block == first[0]);
  second.push_back(*block);
  CHECK(allocator.num_free() == 2);
  // Under the hash of a cached block, other tokens, another parent or another salt is a miss, never a wrong
  // block; so is an unknown hash.
  CHECK_FALSE(allocator.TakeCached(hash_b, id_a, "", kTokensA).has_value());
  CHECK_FALSE(allocator.TakeCached(hash_b, kNoBlockId, "", kTokensB).has_value());
  CHECK_FALSE(allocator.TakeCached(hash_b, id_b, "", kTokensB).has_value());
  CHECK_FALSE(allocator.TakeCached(hash_a, kNoBlockId, "tenant", kTokensA).has_value());
  CHECK_FALSE(allocator.TakeCached(12345, kNoBlockId, "", kTokensA).has_value());

  allocator.Release(first);
  CHECK(allocator.num_free() == 3);  // first[1] is free (and still cached); first[0] is held by `second`
  allocator.Release(second);
  CHECK(allocator.num_free() == 4);
  CHECK(allocator.num_cached() == 2);

  // A free cached block comes back from the cache...
  block = allocator.TakeCached(hash_b, id_a, "", kTokensB);
  REQUIRE(block.has_value());
  CHECK(allocator.num_free() == 3);
  std::vector<int32_t> holder = {*block};
  allocator.Release(holder);
  // ... and contents cached already are not cached twice: the first block's identity is theirs.
  std::vector<int32_t> other;
  REQUIRE(allocator.Allocate(1, other));
  CHECK(allocator.Cache(other[0], hash_a, kNoBlockId, "", kTokensA) == id_a);
  CHECK(allocator.id(other[0]) == kNoBlockId);
  CHECK(allocator.num_cached() == 2);
  allocator.Release(other);
}

TEST_CASE("block allocator: the cache evicts the least recently freed blocks, a sequence's tail first",
          "[unit][engine]") {
  BlockAllocator allocator(4);
  std::vector<int32_t> table;
  REQUIRE(allocator.Allocate(3, table));
  const uint64_t hash_a = First(kTokensA);
  const uint64_t hash_b = BlockHash(hash_a, kTokensB);
  const BlockId id_a = allocator.Cache(table[0], hash_a, kNoBlockId, "", kTokensA);
  allocator.Cache(table[1], hash_b, id_a, "", kTokensB);
  allocator.Release(table);  // freed in the order table[2], table[1], table[0]

  // The never-used block goes first, then the tail of the released sequence, and its head last.
  std::vector<int32_t> taken;
  REQUIRE(allocator.Allocate(1, taken));
  CHECK(allocator.num_evicted() == 0);
  REQUIRE(allocator.Allocate(2, taken));
  CHECK(allocator.num_evicted() == 1);
  CHECK_FALSE(allocator.TakeCached(hash_b, id_a, "", kTokensB).has_value());
  REQUIRE(allocator.TakeCached(hash_a, kNoBlockId, "", kTokensA).has_value());
  CHECK(allocator.num_free() == 0);
}

TEST_CASE("block allocator: an evicted parent's identity is never given again, so its children stay unreachable",
          "[unit][engine]") {
  BlockAllocator allocator(2);
  std::vector<int32_t> table;
  REQUIRE(allocator.Allocate(2, table));
  const uint64_t hash_a = First(kTokensA);
  const uint64_t hash_b = BlockHash(hash_a, kTokensB);
  const BlockId parent = allocator.Cache(table[0], hash_a, kNoBlockId, "", kTokensA);
  allocator.Cache(table[1], hash_b, parent, "", kTokensB);
  std::vector<int32_t> head = {table[0]};
  allocator.Release(head);  // the parent alone is free: the next allocation evicts it
  std::vector<int32_t> fresh;
  REQUIRE(allocator.Allocate(1, fresh));
  CHECK(fresh[0] == table[0]);
  // The same block caches the same tokens again: a new identity, after which the old child is not cached.
  const BlockId again = allocator.Cache(fresh[0], hash_a, kNoBlockId, "", kTokensA);
  CHECK(again != parent);
  CHECK_FALSE(allocator.TakeCached(hash_b, again, "", kTokensB).has_value());
}

TEST_CASE("block allocator: a hash collision never returns another chain's block", "[unit][engine]") {
  // Every block under one hash (a forced collision): each lookup finds a candidate, told apart by identity.
  constexpr uint64_t kColliding = 42;
  BlockAllocator allocator(8);
  std::vector<int32_t> victim;
  REQUIRE(allocator.Allocate(2, victim));
  const BlockId root = allocator.Cache(victim[0], kColliding, kNoBlockId, "", kTokensA);
  REQUIRE(root != kNoBlockId);
  // The second block collides with the first, which is in use: it stays uncached rather than displace it.
  CHECK(allocator.Cache(victim[1], kColliding, root, "", kTokensB) == kNoBlockId);

  CHECK_FALSE(allocator.TakeCached(kColliding, kNoBlockId, "", kTokensB).has_value());            // other tokens
  CHECK_FALSE(allocator.TakeCached(kColliding, kNoBlockId, "other salt", kTokensA).has_value());  // another salt
  CHECK_FALSE(allocator.TakeCached(kColliding, root, "", kTokensA).has_value());                  // another parent
  CHECK_FALSE(allocator.TakeCached(kColliding, root + 1, "", kTokensB).has_value());
  auto hit = allocator.TakeCached(kColliding, kNoBlockId, "", kTokensA);
  REQUIRE(hit.has_value());
  CHECK(*hit == victim[0]);
  std::vector<int32_t> hit_table = {*hit};
  allocator.Release(hit_table);

  // Once the victim's block is free, a colliding block in use takes its slot: the victim's contents are a
  // miss now, and never the other block.
  allocator.Release(victim);
  std::vector<int32_t> attacker;
  REQUIRE(allocator.Allocate(1, attacker));
  const BlockId attacker_id = allocator.Cache(attacker[0], kColliding, kNoBlockId, "", kTokensB);
  REQUIRE(attacker_id != kNoBlockId);
  CHECK(allocator.num_cached() == 1);
  CHECK_FALSE(allocator.TakeCached(kColliding, kNoBlockId, "", kTokensA).has_value());
  CHECK(allocator.TakeCached(kColliding, kNoBlockId, "", kTokensB) == attacker[0]);
}

TEST_CASE("block allocator: salts keep first blocks apart, and the same salt shares", "[unit][engine]") {
  BlockAllocator allocator(8);
  std::vector<int32_t> table;
  REQUIRE(allocator.Allocate(3, table));
  CHECK(allocator.Cache(table[0], First(kTokensA, "alice"), kNoBlockId, "alice", kTokensA) != kNoBlockId);
  CHECK(allocator.Cache(table[1], First(kTokensA, "bob"), kNoBlockId, "bob", kTokensA) != kNoBlockId);
  CHECK(allocator.Cache(table[2], First(kTokensA), kNoBlockId, "", kTokensA) != kNoBlockId);
  CHECK(allocator.num_cached() == 3);
  CHECK(allocator.TakeCached(First(kTokensA, "alice"), kNoBlockId, "alice", kTokensA) == table[0]);
  CHECK(allocator.TakeCached(First(kTokensA, "bob"), kNoBlockId, "bob", kTokensA) == table[1]);
  CHECK(allocator.TakeCached(First(kTokensA), kNoBlockId, "", kTokensA) == table[2]);
  CHECK_FALSE(allocator.TakeCached(First(kTokensA, "carol"), kNoBlockId, "carol", kTokensA).has_value());
  // Under alice's hash, bob's or no salt is a miss.
  CHECK_FALSE(allocator.TakeCached(First(kTokensA, "alice"), kNoBlockId, "bob", kTokensA).has_value());
  CHECK_FALSE(allocator.TakeCached(First(kTokensA, "alice"), kNoBlockId, "", kTokensA).has_value());
}

}  // namespace
}  // namespace llmc::engine
