#include "common/prefix_hash.h"

namespace llmc {
namespace {

// 64-bit FNV-1a.
uint64_t Fnv1a(std::string_view bytes) {
  uint64_t hash = 0xcbf29ce484222325ULL;
  for (const char byte : bytes) {
    hash ^= static_cast<unsigned char>(byte);
    hash *= 0x100000001b3ULL;
  }
  return hash;
}

}  // namespace

std::vector<uint64_t> PrefixChunkHashes(std::string_view input, size_t chunk_bytes, size_t max_chunks) {
  std::vector<uint64_t> hashes;
  if (chunk_bytes == 0) return hashes;
  uint64_t parent = 0x7072656669782d31ULL;
  for (size_t start = 0; start + chunk_bytes <= input.size() && hashes.size() < max_chunks; start += chunk_bytes) {
    parent = MixBits(parent * 0x9e3779b97f4a7c15ULL ^ Fnv1a(input.substr(start, chunk_bytes)));
    hashes.push_back(parent);
  }
  return hashes;
}

}  // namespace llmc
