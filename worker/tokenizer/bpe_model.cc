#include "worker/tokenizer/bpe_model.h"

#include <queue>

#include "absl/base/thread_annotations.h"
#include "absl/hash/hash.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "common/status_macros.h"
#include "common/utf8.h"
#include "nlohmann/json.hpp"
#include "worker/tokenizer/byte_level.h"

namespace llmc::tokenizer {
namespace {

constexpr size_t kCacheShards = 16;
constexpr size_t kCacheEntriesPerShard = 8192;
constexpr size_t kMaxCachedWordBytes = 64;

}  // namespace

// Recently seen words and their ids: natural text repeats words constantly, and a lookup is far cheaper
// than merging. Sharded so concurrent encoders rarely meet on a lock; a full shard is simply emptied.
class BpeModel::WordCache {
 public:
  bool Lookup(absl::string_view word, std::vector<int32_t>& ids) {
    Shard& shard = ShardFor(word);
    absl::MutexLock lock(&shard.mu);
    const auto it = shard.words.find(word);
    if (it == shard.words.end()) return false;
    ids.insert(ids.end(), it->second.begin(), it->second.end());
    return true;
  }

  void Insert(absl::string_view word, const int32_t* ids, size_t count) {
    Shard& shard = ShardFor(word);
    absl::MutexLock lock(&shard.mu);
    if (shard.words.size() >= kCacheEntriesPerShard) shard.words.clear();
    shard.words.try_emplace(word, ids, ids + count);
  }

 private:
  struct Shard {
    absl::Mutex mu;
    absl::flat_hash_map<std::string, std::vector<int32_t>> words ABSL_GUARDED_BY(mu);
  };
  Shard& ShardFor(absl::string_view word) { return shards_[absl::Hash<absl::string_view>()(word) % kCacheShards]; }

  std::array<Shard, kCacheShards> shards_;
};

BpeModel::BpeModel() : cache_(std::make_unique<WordCache>()) {}
BpeModel::~BpeModel() = default;

absl::StatusOr<std::unique_ptr<BpeModel>> BpeModel::FromJson(const nlohmann::json& model, BpeSymbols symbols) {
  const std::string type = model.value("type", "");
  if (type != "BPE") {
    return absl::UnimplementedError(absl::StrCat("unsupported tokenizer model type '", type, "' (only BPE is)"));
  }
  const bool byte_fallback = model.value("byte_fallback", false);
  if (byte_fallback && symbols == BpeSymbols::kBytes) {
    return absl::UnimplementedError("unsupported tokenizer: byte_fallback with a byte-level pre-tokenizer");
  }
  const auto vocab = model.find("vocab");
  const auto merges = model.find("merges");
  if (vocab == model.end() || !vocab->is_object() || merges == model.end() || !merges->is_array()) {
    return absl::InvalidArgumentError("tokenizer model needs a 'vocab' object and a 'merges' list");
  }
  auto result = std::unique_ptr<BpeModel>(new BpeModel());
  result->symbols_ = symbols;
  result->ignore_merges_ = model.value("ignore_merges", false);
  result->fuse_unk_ = model.value("fuse_unk", false);
  RETURN_IF_ERROR(result->ReadVocab(*vocab));
  for (int byte = 0; byte < 256; ++byte) {
    if (symbols == BpeSymbols::kBytes) {
      const int32_t id = result->TokenId(std::string(1, static_cast<char>(byte)));
      if (id < 0) return absl::InvalidArgumentError(absl::StrCat("vocab has no token for byte ", byte));
      result->byte_ids_[byte] = id;
    } else {
      result->byte_ids_[byte] = byte_fallback ? result->TokenId(absl::StrFormat("<0x%02X>", byte)) : -1;
    }
  }
  if (const auto unk = model.find("unk_token"); unk != model.end() && unk->is_string()) {
    result->unk_id_ = result->TokenId(unk->get<std::string>());
  }
  RETURN_IF_ERROR(result->ReadMerges(*merges));
  return result;
}

absl::Status BpeModel::ReadVocab(const nlohmann::json& vocab) {
  const ByteLevelAlphabet& alphabet = ByteLevelAlphabet::Get();
  std::vector<std::string> id_to_bytes;
  id_to_bytes.reserve(vocab.size());
  for (const auto& [token, id_json] : vocab.items()) {
    if (!id_json.is_number_integer() || id_json.get<int64_t>() < 0 || id_json.get<int64_t>() > INT32_MAX) {
      return absl::InvalidArgumentError(absl::StrCat("vocab entry '", token, "' has no valid id"));
    }
    const int32_t id = id_json.get<int32_t>();
    std::optional<std::string> bytes = token;
    if (symbols_ == BpeSymbols::kBytes) {
      bytes = alphabet.ToBytes(token);
      if (!bytes) {
        return absl::UnimplementedError(absl::StrCat("vocab token '", token,
                                                     "' is not written in the byte-level alphabet of a byte-level "
                                                     "tokenizer"));
      }
    }
    if (static_cast<size_t>(id) >= id_to_bytes.size()) id_to_bytes.resize(id + 1);
    id_to_bytes[id] = std::move(*bytes);
  }
  return tokens_.Assign(id_to_bytes, /*indexed=*/true);
}

absl::Status BpeModel::ReadMerges(const nlohmann::json& merges) {
  const ByteLevelAlphabet& alphabet = ByteLevelAlphabet::Get();
  const auto spelled = [&](const std::string& token) -> std::optional<std::string> {
    if (symbols_ == BpeSymbols::kBytes) return alphabet.ToBytes(token);
    return token;
  };
  merges_.reserve(merges.size());
  int32_t rank = 0;
  for (const auto& merge : merges) {
    std::string left, right;
    if (merge.is_string()) {
      const std::string text = merge.get<std::string>();
      const size_t space = text.find(' ');
      if (space == std::string::npos) return absl::InvalidArgumentError(absl::StrCat("bad merge '", text, "'"));
      left = text.substr(0, space);
      right = text.substr(space + 1);
    } else if (merge.is_array() && merge.size() == 2 && merge[0].is_string() && merge[1].is_string()) {
      left = merge[0].get<std::string>();
      right = merge[1].get<std::string>();
    } else {
      return absl::InvalidArgumentError(absl::StrCat("bad merge at rank ", rank));
    }
    const auto left_bytes = spelled(left), right_bytes = spelled(right);
    const int32_t left_id = left_bytes ? TokenId(*left_bytes) : -1;
    const int32_t right_id = right_bytes ? TokenId(*right_bytes) : -1;
    const int32_t merged_id = left_bytes && right_bytes ? TokenId(*left_bytes + *right_bytes) : -1;
    if (left_id < 0 || right_id < 0 || merged_id < 0) {
      return absl::InvalidArgumentError(absl::StrCat("merge '", left, " ", right, "' uses tokens not in the vocab"));
    }
    merges_.try_emplace(PairKey(left_id, right_id), MergeRule{rank, merged_id});
    ++rank;
  }
  return absl::OkStatus();
}

absl::string_view BpeModel::TokenBytes(int32_t id) const { return tokens_.Get(id); }

int32_t BpeModel::TokenId(absl::string_view bytes) const { return tokens_.Find(bytes); }

void BpeModel::EncodeWord(absl::string_view word, std::vector<int32_t>& ids) const {
  if (word.empty()) return;
  if (word.size() == 1 && symbols_ == BpeSymbols::kBytes) {
    ids.push_back(byte_ids_[static_cast<unsigned char>(word[0])]);
    return;
  }
  if (ignore_merges_) {
    if (const int32_t id = TokenId(word); id >= 0) {
      ids.push_back(id);
      return;
    }
  }
  const bool cacheable = word.size() <= kMaxCachedWordBytes;
  if (cacheable && cache_->Lookup(word, ids)) return;
  const size_t start = ids.size();
  std::vector<int32_t> symbols;
  InitialSymbols(word, symbols);
  ApplyMerges(symbols, ids);
  if (cacheable) cache_->Insert(word, ids.data() + start, ids.size() - start);
}

void BpeModel::InitialSymbols(absl::string_view word, std::vector<int32_t>& symbols) const {
  symbols.reserve(word.size());
  if (symbols_ == BpeSymbols::kBytes) {
    for (unsigned char byte : word) symbols.push_back(byte_ids_[byte]);
    return;
  }
  bool last_was_unk = false;
  for (size_t i = 0; i < word.size();) {
    const size_t length = std::max<size_t>(1, ReadUtf8Sequence(word, i).length);
    const absl::string_view character = word.substr(i, length);
    i += length;
    if (const int32_t id = TokenId(character); id >= 0) {
      symbols.push_back(id);
      last_was_unk = false;
      continue;
    }
    bool have_bytes = true;
    for (unsigned char byte : character) have_bytes = have_bytes && byte_ids_[byte] >= 0;
    if (have_bytes) {
      for (unsigned char byte : character) symbols.push_back(byte_ids_[byte]);
      last_was_unk = false;
    } else if (unk_id_ >= 0 && !(fuse_unk_ && last_was_unk)) {
      symbols.push_back(unk_id_);
      last_was_unk = true;
    }
  }
}

// Standard BPE: repeatedly merge the adjacent pair with the lowest rank, leftmost first, using a heap of
// candidate pairs over a linked list of symbols (stale heap entries are skipped), O(n log n).
void BpeModel::ApplyMerges(const std::vector<int32_t>& initial, std::vector<int32_t>& ids) const {
  struct Symbol {
    int32_t id;
    int32_t prev;
    int32_t next;
  };
  struct Candidate {
    int32_t rank;
    int32_t position;
    int32_t left_id;
    int32_t right_id;
    bool operator>(const Candidate& other) const {
      return rank != other.rank ? rank > other.rank : position > other.position;
    }
  };
  const int32_t length = static_cast<int32_t>(initial.size());
  if (length == 0) return;
  std::vector<Symbol> symbols(length);
  for (int32_t i = 0; i < length; ++i) symbols[i] = {initial[i], i - 1, i + 1 < length ? i + 1 : -1};
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> heap;
  const auto push_pair = [&](int32_t left) {
    if (left < 0) return;
    const int32_t right = symbols[left].next;
    if (right < 0) return;
    const auto it = merges_.find(PairKey(symbols[left].id, symbols[right].id));
    if (it != merges_.end()) heap.push({it->second.rank, left, symbols[left].id, symbols[right].id});
  };
  for (int32_t i = 0; i + 1 < length; ++i) push_pair(i);
  while (!heap.empty()) {
    const Candidate candidate = heap.top();
    heap.pop();
    Symbol& left = symbols[candidate.position];
    if (left.id != candidate.left_id || left.next < 0) continue;  // stale: the symbol changed or died
    Symbol& right = symbols[left.next];
    if (right.id != candidate.right_id) continue;
    left.id = merges_.find(PairKey(candidate.left_id, candidate.right_id))->second.merged_id;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = candidate.position;
    right.id = -1;  // dead
    push_pair(left.prev);
    push_pair(candidate.position);
  }
  for (int32_t i = 0; i >= 0; i = symbols[i].next) ids.push_back(symbols[i].id);
}

}  // namespace llmc::tokenizer
