#ifndef LLMC_COMMON_PREFIX_HASH_H_
#define LLMC_COMMON_PREFIX_HASH_H_

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

namespace llmc {

// A request's input as the dispatcher sees it, for prefix-aware routing: the chained hashes of its full
// `chunk_bytes`-byte chunks, first chunk first, at most `max_chunks` of them. Two inputs share the first k
// hashes exactly when they share their first k chunks (barring 64-bit collisions), so a request whose
// input starts like an earlier one's can go where that one went, whose prefix cache likely holds it. The
// hash is the same in every process and build.
inline constexpr size_t kPrefixChunkBytes = 128;
// The most input bytes the hashes cover.
inline constexpr size_t kMaxPrefixBytes = kPrefixChunkBytes * 256;
inline constexpr size_t kMaxPrefixChunks = kMaxPrefixBytes / kPrefixChunkBytes;
// MurmurHash3's 64-bit finalizer: every input bit affects every output bit. For hash chains built here and
// in the engine's prefix cache.
inline uint64_t MixBits(uint64_t value) {
  value ^= value >> 33;
  value *= 0xff51afd7ed558ccdULL;
  value ^= value >> 33;
  value *= 0xc4ceb9fe1a85ec53ULL;
  return value ^ (value >> 33);
}

std::vector<uint64_t> PrefixChunkHashes(std::string_view input, size_t chunk_bytes = kPrefixChunkBytes,
                                        size_t max_chunks = kMaxPrefixChunks);

}  // namespace llmc

#endif  // LLMC_COMMON_PREFIX_HASH_H_
