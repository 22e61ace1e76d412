#ifndef LLMC_WORKER_MODEL_CPU_ATTENTION_KERNEL_H_
#define LLMC_WORKER_MODEL_CPU_ATTENTION_KERNEL_H_

// Causal attention of a tile of query rows over a paged context, with an online softmax: the context is
// visited one cache block at a time and never materialised, so memory stays flat whatever its length.
// Included by each panel_kernels_*.cc, which compile it with their own instruction set; the loops are
// written so the compiler vectorizes them (over a block's keys for the scores, over head_dim for the values).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>

#include "worker/model/cpu/vector_math.h"

namespace llmc::model::cpu {

struct AttentionArgs {
  const void* query;        // [tokens][num_heads][head_dim], bfloat16 or float32
  void* out;                // same shape and type
  const void* key_cache;    // [blocks][block_size][num_kv_heads][head_dim]
  const void* value_cache;  // same
  const int32_t* block_table;
  int64_t first_row;       // the tile's first query row (a token index)
  int64_t num_rows;        // rows in the tile
  int64_t first_position;  // position of the tile's first row; row r attends to positions <= first_position + r
  int64_t window;          // > 0: row r attends only to positions > first_position + r - window; 0: all of them
  int64_t num_heads, num_kv_heads, head_dim, block_size;
  int64_t kv_head;  // query heads kv_head * group .. + group - 1 share it
  float scale;
  bool bf16;
  float* scratch;                // AttentionScratchFloats(...) floats
  const float* sinks = nullptr;  // [num_heads]: a logit per head in every row's softmax, weighing no value
  // One chunk of the context (split decoding): only keys at positions key_begin (a multiple of block_size) ..
  // key_end - 1 (key_end < 0: to the end), and, with `partial`, each query's unnormalised state instead of `out`:
  // [queries][head_dim] weighted sums, then [queries] running maxima, then [queries] sums of weights, queries
  // ordered (row, head of the group). A row that sees no key of the chunk gets maximum -inf and sum 0.
  int64_t key_begin = 0;
  int64_t key_end = -1;
  float* partial = nullptr;
  // KV heads kv_head .. kv_head + kv_head_count - 1 walked together, block by block, each head with its own state
  // and the same arithmetic as alone (the cache's rows are [kv_heads][head_dim]: a block read for every head at
  // once streams through memory, where one head's 2 KB-strided slices got half the bandwidth). With `partial`,
  // head i's states start partial_head_stride floats after head i - 1's.
  int64_t kv_head_count = 1;
  int64_t partial_head_stride = 0;
};

// Rows in one tile; a chunk of a sequence is split into tiles of at most this many rows.
constexpr int64_t kAttentionRowTile = 16;

// Heads one call walks together at most.
constexpr int64_t kAttentionMaxWalkHeads = 16;

// One head's state (queries, sums, scores, maxima and sums of weights), then what the heads share (one block's
// keys and values, corrections).
inline int64_t AttentionHeadStateFloats(int64_t group, int64_t head_dim, int64_t block_size) {
  const int64_t queries = kAttentionRowTile * group;
  return 2 * queries * head_dim + queries * (block_size + 2);
}
inline int64_t AttentionScratchFloats(int64_t group, int64_t head_dim, int64_t block_size, int64_t heads = 1) {
  return heads * AttentionHeadStateFloats(group, head_dim, block_size) + 2 * head_dim * block_size + group;
}

// Each panel_kernels_*.cc must get its own copy of the code below, compiled for its instruction set: an
// ordinary inline function would be merged across them by the linker, leaving one copy for all paths.
namespace {
namespace attention_detail {

inline float Bf16ToFloat(uint16_t value) {
  const uint32_t bits = static_cast<uint32_t>(value) << 16;
  float result;
  std::memcpy(&result, &bits, sizeof(result));
  return result;
}

inline uint16_t FloatToBf16(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

inline void LoadRow(const void* base, int64_t offset, bool bf16, int64_t n, float* out) {
  if (bf16) {
    const uint16_t* src = static_cast<const uint16_t*>(base) + offset;
    for (int64_t i = 0; i < n; ++i) out[i] = Bf16ToFloat(src[i]);
  } else {
    std::memcpy(out, static_cast<const float*>(base) + offset, n * sizeof(float));
  }
}

// A GCC generic vector as wide as the path's registers (zmm with AVX512, ymm with AVX, xmm otherwise): the
// auto-vectorizer, left to itself, vectorizes these loop nests across the wrong dimension, and a generic vector
// wider than the registers is split through the stack.
#if defined(__AVX512F__)
typedef float FloatVector __attribute__((vector_size(64)));
#elif defined(__AVX__)
typedef float FloatVector __attribute__((vector_size(32)));
#else
typedef float FloatVector __attribute__((vector_size(16)));
#endif
constexpr int kVectorFloats = sizeof(FloatVector) / sizeof(float);
constexpr int kVectorsPer16 = 16 / kVectorFloats;

inline FloatVector LoadVector(const float* p) {
  FloatVector v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

// Scores of N consecutive query vectors against a 16-key block (keys_t is [hd][16]): N independent rows of
// accumulator vectors, so the multiply-adds do not wait on each other.
template <int N>
inline void Scores16(const float* q, int64_t hd, const float* keys_t, float* s) {
  FloatVector acc[N][kVectorsPer16];
  for (int i = 0; i < N; ++i) {
    for (int v = 0; v < kVectorsPer16; ++v) acc[i][v] = FloatVector{};
  }
  for (int64_t d = 0; d < hd; ++d) {
    for (int v = 0; v < kVectorsPer16; ++v) {
      const FloatVector kt = LoadVector(keys_t + d * 16 + v * kVectorFloats);
      for (int i = 0; i < N; ++i) acc[i][v] += q[i * hd + d] * kt;
    }
  }
  for (int i = 0; i < N; ++i) {
    for (int v = 0; v < kVectorsPer16; ++v)
      std::memcpy(s + i * 16 + v * kVectorFloats, &acc[i][v], sizeof(FloatVector));
  }
}

inline void ScoresAnyBlock(const float* q, int64_t hd, const float* keys_t, int64_t bs, float* s) {
  for (int64_t t = 0; t < bs; ++t) s[t] = 0;
  for (int64_t d = 0; d < hd; ++d) {
    const float x = q[d];
    const float* kt = keys_t + d * bs;
    for (int64_t t = 0; t < bs; ++t) s[t] += x * kt[t];
  }
}

// Scores for `count` consecutive query vectors (s is [count][bs]).
inline void Scores(const float* q, int64_t count, int64_t hd, const float* keys_t, int64_t bs, float* s) {
  if (bs != 16) {
    for (int64_t i = 0; i < count; ++i) ScoresAnyBlock(q + i * hd, hd, keys_t, bs, s + i * bs);
    return;
  }
  int64_t i = 0;
  for (; i + 4 <= count; i += 4) Scores16<4>(q + i * hd, hd, keys_t, s + i * 16);
  switch (count - i) {
    case 3:
      Scores16<3>(q + i * hd, hd, keys_t, s + i * 16);
      break;
    case 2:
      Scores16<2>(q + i * hd, hd, keys_t, s + i * 16);
      break;
    case 1:
      Scores16<1>(q + i * hd, hd, keys_t, s + i * 16);
      break;
    default:
      break;
  }
}

// a = a * correction + sum over t < visible of p[t] * values[t] (values is [bs][hd]), with a kept in
// registers for the common head sizes.
template <int Chunks>
inline void AccumulateValuesFixed(float* a, float correction, const float* p, const float* values, int64_t visible) {
  constexpr int kVectors = Chunks * kVectorsPer16;
  constexpr int64_t kHd = Chunks * 16;
  FloatVector acc[kVectors];
  for (int c = 0; c < kVectors; ++c) acc[c] = LoadVector(a + c * kVectorFloats) * correction;
  for (int64_t t = 0; t < visible; ++t) {
    const float weight = p[t];
    for (int c = 0; c < kVectors; ++c) acc[c] += weight * LoadVector(values + t * kHd + c * kVectorFloats);
  }
  for (int c = 0; c < kVectors; ++c) std::memcpy(a + c * kVectorFloats, &acc[c], sizeof(FloatVector));
}

inline void AccumulateValues(float* a, float correction, const float* p, const float* values, int64_t visible,
                             int64_t hd) {
  switch (hd) {
    case 64:
      AccumulateValuesFixed<4>(a, correction, p, values, visible);
      return;
    case 128:
      AccumulateValuesFixed<8>(a, correction, p, values, visible);
      return;
    default:
      break;
  }
  for (int64_t d = 0; d < hd; ++d) a[d] *= correction;
  for (int64_t t = 0; t < visible; ++t) {
    const float weight = p[t];
    const float* v = values + t * hd;
    for (int64_t d = 0; d < hd; ++d) a[d] += weight * v[d];
  }
}

// How a path holds queries and keys for the score products. This one, for every path: float32 queries
// pre-scaled, float32 keys transposed to [hd][bs], generic-vector products.
struct FloatKeys {
  static void LoadQuery(const AttentionArgs& args, int64_t token, int64_t head, float* slot) {
    const int64_t hd = args.head_dim;
    LoadRow(args.query, (token * args.num_heads + head) * hd, args.bf16, hd, slot);
    for (int64_t d = 0; d < hd; ++d) slot[d] *= args.scale;
  }
  // Keys of `valid` tokens from `base` (elements), token_stride apart; the rest of the block zeroed.
  static void LoadKeys(const AttentionArgs& args, int64_t base, int64_t token_stride, int64_t valid, float* keys) {
    const int64_t hd = args.head_dim, bs = args.block_size;
    float row[512];
    for (int64_t t = 0; t < valid; ++t) {
      LoadRow(args.key_cache, base + t * token_stride, args.bf16, hd, row);
      for (int64_t d = 0; d < hd; ++d) keys[d * bs + t] = row[d];
    }
    for (int64_t t = valid; t < bs; ++t) {
      for (int64_t d = 0; d < hd; ++d) keys[d * bs + t] = 0;
    }
  }
  // Scaled scores of `count` consecutive query slots (hd floats apart) against the block: s is [count][bs].
  static void Scores(const AttentionArgs& args, const float* q, int64_t count, const float* keys, float* s) {
    attention_detail::Scores(q, count, args.head_dim, keys, args.block_size, s);
  }
  // Values of `valid` tokens into the block's value buffer (hd * bs floats), as AccumulateValues reads them.
  static void LoadValues(const AttentionArgs& args, int64_t base, int64_t token_stride, int64_t valid, float* values) {
    for (int64_t t = 0; t < valid; ++t) {
      LoadRow(args.value_cache, base + t * token_stride, args.bf16, args.head_dim, values + t * args.head_dim);
    }
  }
  // For each of the `group` heads g of one row: a[g] = a[g] * corrections[g] + sum over t < visible of
  // p[g][t] * value[t] (a is [group][hd], p is [group][bs]).
  static void AccumulateGroup(float* a, const float* corrections, const float* p, const float* values, int64_t visible,
                              int64_t hd, int64_t group, int64_t bs) {
    for (int64_t g = 0; g < group; ++g) {
      attention_detail::AccumulateValues(a + g * hd, corrections[g], p + g * bs, values, visible, hd);
    }
  }
  // s[t] = exp(s[t] - new_max) for the `visible` scores, where new_max = max(running_max, max of them);
  // returns new_max and the sum of the exponentials.
  static void Exponentiate(float* s, int64_t visible, float running_max, float* new_max, float* block_sum) {
    float block_max = -std::numeric_limits<float>::infinity();
    for (int64_t t = 0; t < visible; ++t) block_max = std::max(block_max, s[t]);
    *new_max = std::max(running_max, block_max);
    for (int64_t t = 0; t < visible; ++t) s[t] = FastExp(s[t] - *new_max);
    float sum = 0;
    for (int64_t t = 0; t < visible; ++t) sum += s[t];
    *block_sum = sum;
  }
};

}  // namespace attention_detail

namespace attention_detail {

// One KV head's walk over a tile's context: Begin, then Block for each cache block from FirstBlock() up to
// Context(), then End. Query slots and the key block are `hd` and `hd * bs` floats, whatever Keys keeps in them.
template <typename Keys>
class HeadWalk {
 public:
  // state: AttentionHeadStateFloats floats; keys and values (hd * bs each) and corrections (group) may be shared
  // with other heads' walks, which use them one block after another.
  void Begin(const AttentionArgs& args, float* state, float* keys, float* values, float* corrections) {
    args_ = args;
    group_ = args.num_heads / args.num_kv_heads, hd_ = args.head_dim, bs_ = args.block_size;
    queries_ = args.num_rows * group_;
    q_ = state;                       // [queries][hd]
    acc_ = q_ + queries_ * hd_;       // [queries][hd]
    scores_ = acc_ + queries_ * hd_;  // [queries][bs]
    running_max_ = scores_ + queries_ * bs_;
    running_sum_ = running_max_ + queries_;
    keys_ = keys, values_ = values, corrections_ = corrections;
    for (int64_t r = 0; r < args.num_rows; ++r) {
      for (int64_t g = 0; g < group_; ++g) {
        const int64_t index = r * group_ + g;
        Keys::LoadQuery(args, args.first_row + r, args.kv_head * group_ + g, q_ + index * hd_);
        // A sink starts the online softmax as a key of logit sinks[head] and value zero.
        running_max_[index] =
            args.sinks != nullptr ? args.sinks[args.kv_head * group_ + g] : -std::numeric_limits<float>::infinity();
        running_sum_[index] = args.sinks != nullptr ? 1.0f : 0.0f;
      }
    }
    std::fill(acc_, acc_ + queries_ * hd_, 0.0f);
  }

  int64_t Context() const {
    return args_.key_end >= 0 ? std::min(args_.key_end, args_.first_position + args_.num_rows)
                              : args_.first_position + args_.num_rows;
  }
  // With a window, row r sees positions first_position + r - window + 1 .. first_position + r: the blocks
  // before the first row's window are never read.
  int64_t FirstBlock() const {
    const int64_t first_key = std::max(
        args_.key_begin, args_.window > 0 ? std::max<int64_t>(0, args_.first_position - args_.window + 1) : int64_t{0});
    return first_key / bs_ * bs_;
  }

  void Block(int64_t block_start) {
    const int64_t token_stride = args_.num_kv_heads * hd_;
    const int64_t block = args_.block_table[block_start / bs_];
    const int64_t valid = std::min(bs_, Context() - block_start);
    const int64_t base = block * bs_ * token_stride + args_.kv_head * hd_;
    Keys::LoadKeys(args_, base, token_stride, valid, keys_);
    Keys::LoadValues(args_, base, token_stride, valid, values_);
    for (int64_t r = 0; r < args_.num_rows; ++r) {
      const int64_t position = args_.first_position + r;
      if (block_start > position) continue;  // this row ends before the block; later rows may not
      // Keys of the block before the row's window (a prefix of `hidden` tokens) are masked; a row whose window
      // starts past the block skips it.
      const int64_t hidden = args_.window > 0 ? std::max<int64_t>(0, position - args_.window + 1 - block_start) : 0;
      if (hidden >= valid) continue;
      const int64_t visible = std::min(valid, position - block_start + 1);
      Keys::Scores(args_, q_ + r * group_ * hd_, group_, keys_, scores_ + r * group_ * bs_);
      for (int64_t g = 0; g < group_; ++g) {
        const int64_t index = r * group_ + g;
        float* s = scores_ + index * bs_;
        float new_max, block_sum;
        // A masked score is -inf, so it sets no maximum; its weight (FastExp clamps, leaving ~1e-38) is zeroed
        // before the values are summed, and what it adds to the sum is below float resolution.
        std::fill(s, s + hidden, -std::numeric_limits<float>::infinity());
        Keys::Exponentiate(s, visible, running_max_[index], &new_max, &block_sum);
        std::fill(s, s + hidden, 0.0f);
        corrections_[g] = FastExp(running_max_[index] - new_max);
        running_sum_[index] = running_sum_[index] * corrections_[g] + block_sum;
        running_max_[index] = new_max;
      }
      // The group's heads together: each value vector then serves all of them.
      Keys::AccumulateGroup(acc_ + r * group_ * hd_, corrections_, scores_ + r * group_ * bs_, values_, visible, hd_,
                            group_, bs_);
    }
  }

  void End() const {
    if (args_.partial != nullptr) {
      std::copy(acc_, acc_ + queries_ * hd_, args_.partial);
      std::copy(running_max_, running_max_ + queries_, args_.partial + queries_ * hd_);
      std::copy(running_sum_, running_sum_ + queries_, args_.partial + queries_ * hd_ + queries_);
      return;
    }
    for (int64_t r = 0; r < args_.num_rows; ++r) {
      for (int64_t g = 0; g < group_; ++g) {
        const int64_t index = r * group_ + g;
        const int64_t head = args_.kv_head * group_ + g;
        const float inverse = 1.0f / running_sum_[index];
        const float* a = acc_ + index * hd_;
        const int64_t offset = ((args_.first_row + r) * args_.num_heads + head) * hd_;
        if (args_.bf16) {
          uint16_t* dst = static_cast<uint16_t*>(args_.out) + offset;
          for (int64_t d = 0; d < hd_; ++d) dst[d] = FloatToBf16(a[d] * inverse);
        } else {
          float* dst = static_cast<float*>(args_.out) + offset;
          for (int64_t d = 0; d < hd_; ++d) dst[d] = a[d] * inverse;
        }
      }
    }
  }

 private:
  AttentionArgs args_;
  int64_t group_ = 0, hd_ = 0, bs_ = 0, queries_ = 0;
  float *q_ = nullptr, *acc_ = nullptr, *scores_ = nullptr, *running_max_ = nullptr, *running_sum_ = nullptr;
  float *keys_ = nullptr, *values_ = nullptr, *corrections_ = nullptr;
};

// Part `share` of `shares` of the rows the walked heads read in cache block `block` (its first `rows` tokens), keys
// and values, prefetched into L2 in address order. Walking heads reads each row in head-sized slices, a pattern
// the hardware prefetchers follow poorly; touched a block ahead, a share before each head's turn, the block
// streams in order (one Qwen3-0.6B-shaped layer at 8k tokens from memory: 16-17 GB/s without, 23-25 with; to
// L1 it gained nothing).
inline void PrefetchBlockShare(const AttentionArgs& args, int64_t heads, int64_t block, int64_t rows, int64_t share,
                               int64_t shares) {
  constexpr int64_t kLine = 64;
  const int64_t element = args.bf16 ? 2 : 4;
  const int64_t row_stride = args.num_kv_heads * args.head_dim * element;
  const int64_t lines_per_row = (heads * args.head_dim * element + kLine - 1) / kLine;
  const int64_t lines = rows * lines_per_row;
  // Split by lines, each address found by a division: that spaces the prefetches out. The same lines split by whole
  // rows, in a tight loop, went out in bursts and read 20 GB/s against 22-25 (same layer, taking turns).
  const int64_t first = lines * share / shares, last = lines * (share + 1) / shares;
  const int64_t offset = (block * args.block_size * args.num_kv_heads + args.kv_head) * args.head_dim * element;
  for (const void* cache : {args.key_cache, args.value_cache}) {
    const char* base = static_cast<const char*>(cache) + offset;
    for (int64_t line = first; line < last; ++line) {
      const char* address = base + (line / lines_per_row) * row_stride + (line % lines_per_row) * kLine;
      __builtin_prefetch(address, 0, 2);
      // A loop of prefetches alone has no effect the compiler must keep: GCC deletes it whole.
      asm volatile("" : : "r"(address));
    }
  }
}

}  // namespace attention_detail

// The tile's KV heads kv_head .. + kv_head_count - 1, block by block (scratch: AttentionScratchFloats(group,
// head_dim, block_size, kv_head_count)). Each head's arithmetic is the same whether it walks alone or with others.
template <typename Keys>
inline void AttendWith(const AttentionArgs& args) {
  const int64_t heads = std::min(std::max<int64_t>(1, args.kv_head_count), kAttentionMaxWalkHeads);
  const int64_t group = args.num_heads / args.num_kv_heads, hd = args.head_dim, bs = args.block_size;
  const int64_t state_floats = AttentionHeadStateFloats(group, hd, bs);
  float* keys = args.scratch + heads * state_floats;
  float* values = keys + hd * bs;
  float* corrections = values + hd * bs;
  // Only the walks used are constructed: most calls walk one head, once per work item.
  std::optional<attention_detail::HeadWalk<Keys>> walks[kAttentionMaxWalkHeads];
  for (int64_t h = 0; h < heads; ++h) {
    AttentionArgs head_args = args;
    head_args.kv_head = args.kv_head + h;
    head_args.kv_head_count = 1;
    if (args.partial != nullptr) head_args.partial = args.partial + h * args.partial_head_stride;
    walks[h].emplace().Begin(head_args, args.scratch + h * state_floats, keys, values, corrections);
  }
  const int64_t context = walks[0]->Context();
  for (int64_t block_start = walks[0]->FirstBlock(); block_start < context; block_start += bs) {
    const int64_t next_start = block_start + bs;
    const int64_t next_block = next_start < context ? args.block_table[next_start / bs] : -1;
    for (int64_t h = 0; h < heads; ++h) {
      if (next_block >= 0) {
        attention_detail::PrefetchBlockShare(args, heads, next_block, std::min(bs, context - next_start), h, heads);
      }
      walks[h]->Block(block_start);
    }
  }
  for (int64_t h = 0; h < heads; ++h) walks[h]->End();
}

inline void Attend(const AttentionArgs& args) { AttendWith<attention_detail::FloatKeys>(args); }

}  // namespace
}  // namespace llmc::model::cpu

#endif  // LLMC_WORKER_MODEL_CPU_ATTENTION_KERNEL_H_
