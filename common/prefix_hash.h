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
inline constexpr size_t kMaxPrefixChunks = 256;
std::vector<uint64_t> PrefixChunkHashes(std::string_view input, size_t chunk_bytes = kPrefixChunkBytes,
                                        size_t max_chunks = kMaxPrefixChunks);

}  // namespace llmc

#endif  // LLMC_COMMON_PREFIX_HASH_H_
