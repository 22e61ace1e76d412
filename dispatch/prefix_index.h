#ifndef LLMC_DISPATCH_PREFIX_INDEX_H_
#define LLMC_DISPATCH_PREFIX_INDEX_H_

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace llmc::dispatch {

// An approximate map from request-prefix chunk hashes (common/prefix_hash.h) to the workers recently sent
// requests with that prefix, whose prefix caches likely hold it. Bounded: beyond `capacity` hashes the
// least recently used go (CLOCK replacement); each hash remembers the last kWorkersPerHash workers. Not
// thread-safe (the registry's lock guards it).
class PrefixIndex {
 public:
  static constexpr size_t kWorkersPerHash = 8;

  explicit PrefixIndex(size_t capacity);

  // For each worker id in `workers`, how many leading `hashes` it likely holds: 1 + the position of the
  // last of `hashes` recorded for it (0 if none).
  void Match(absl::Span<const uint64_t> hashes, absl::Span<const std::string* const> workers,
             std::vector<int64_t>& matched);
  // Records that a request with `hashes` went to `worker_id`.
  void Record(absl::Span<const uint64_t> hashes, absl::string_view worker_id);
  // The worker left or restarted: nothing it held is cached any more.
  void Forget(absl::string_view worker_id);

  size_t size() const { return entries_.size(); }

 private:
  static constexpr int32_t kNoWorker = -1;
  struct Entry {
    std::array<int32_t, kWorkersPerHash> workers;  // most recent first; kNoWorker pads
    bool referenced = false;                       // used since the clock hand last passed
  };

  int32_t Intern(absl::string_view worker_id);
  void EvictOne();

  const size_t capacity_;
  absl::flat_hash_map<uint64_t, Entry> entries_;
  std::vector<uint64_t> clock_;  // the hashes in entries_, visited in a circle by the hand
  size_t hand_ = 0;
  // Entries name workers by number; Forget drops a worker's number, so what was recorded under it no
  // longer matches anyone.
  absl::flat_hash_map<std::string, int32_t> worker_numbers_;
  int32_t next_number_ = 0;
  // Match's scratch: worker number -> index among its candidates (kNoWorker between calls), and the
  // numbers it set.
  std::vector<int32_t> candidate_of_number_;
  std::vector<int32_t> numbers_;
};

}  // namespace llmc::dispatch

#endif  // LLMC_DISPATCH_PREFIX_INDEX_H_
