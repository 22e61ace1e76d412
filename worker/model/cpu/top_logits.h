#ifndef LLMC_WORKER_MODEL_CPU_TOP_LOGITS_H_
#define LLMC_WORKER_MODEL_CPU_TOP_LOGITS_H_

// The k largest logits of one row, kept while the LM head produces the row panel by panel, so that greedy and
// top-k sampling never need the full row written out. Order: larger value first, equal values by lower id;
// NaN never enters. A list is k entries of caller memory (no allocation); unused entries have id -1.
#include <algorithm>
#include <cstdint>
#include <limits>

namespace llmc::model::cpu {

struct TopLogit {
  float value;
  int64_t id;
};

inline void ClearTopLogits(TopLogit* list, int64_t k) {
  std::fill(list, list + k, TopLogit{-std::numeric_limits<float>::infinity(), -1});
}

// Whether a ranks above b: the larger value, or of equal values the lower id.
inline bool RanksAbove(float a_value, int64_t a_id, const TopLogit& b) {
  return a_value > b.value || (a_value == b.value && a_id < b.id);
}

// Offers values[0..count) with ids first_id..first_id + count. Offers may come in any order of ids (work
// stealing hands a member runs from both ends), so an equal value displaces a kept one if its id is lower.
inline void OfferTopLogits(TopLogit* list, int64_t k, const float* values, int64_t count, int64_t first_id) {
  if (k <= 0) return;
  TopLogit& last = list[k - 1];
  if (last.id >= 0) {
    // Most panels hold nothing up to the k-th value: one vectorized pass rules them out.
    const float bar = last.value;
    int reaches = 0;
    for (int64_t j = 0; j < count; ++j) reaches |= values[j] >= bar;
    if (reaches == 0) return;
  }
  for (int64_t j = 0; j < count; ++j) {
    const float value = values[j];
    const int64_t id = first_id + j;
    if (value != value || (last.id >= 0 && !RanksAbove(value, id, last))) continue;
    int64_t position = k - 1;
    while (position > 0 && (list[position - 1].id < 0 || RanksAbove(value, id, list[position - 1]))) {
      list[position] = list[position - 1];
      --position;
    }
    list[position] = {value, id};
  }
}

// Merges `lists` sorted lists of k entries (lists[i] at first + i * stride) into out_values/out_ids[0..k);
// heads[0..lists) is the caller's scratch. Slots no list could fill (rows of NaN) get id 0 and value NaN.
inline void MergeTopLogits(const TopLogit* first, int64_t stride, int lists, int64_t k, int64_t* heads,
                           float* out_values, int64_t* out_ids) {
  std::fill(heads, heads + lists, int64_t{0});
  for (int64_t slot = 0; slot < k; ++slot) {
    int best = -1;
    for (int i = 0; i < lists; ++i) {
      if (heads[i] >= k) continue;
      const TopLogit& candidate = first[i * stride + heads[i]];
      if (candidate.id < 0) continue;
      if (best < 0) {
        best = i;
        continue;
      }
      const TopLogit& current = first[best * stride + heads[best]];
      if (RanksAbove(candidate.value, candidate.id, current)) {
        best = i;
      }
    }
    if (best < 0) {
      out_values[slot] = std::numeric_limits<float>::quiet_NaN();
      out_ids[slot] = 0;
      continue;
    }
    const TopLogit& chosen = first[best * stride + heads[best]++];
    out_values[slot] = chosen.value;
    out_ids[slot] = chosen.id;
  }
}

}  // namespace llmc::model::cpu

#endif  // LLMC_WORKER_MODEL_CPU_TOP_LOGITS_H_
