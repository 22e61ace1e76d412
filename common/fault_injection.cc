#include "common/fault_injection.h"

#include <atomic>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"

namespace llmc {
namespace {

struct FaultPoint {
  int64_t first_firing_check = 1;
  int64_t last_firing_check = INT64_MAX;
  std::atomic<int64_t> checks{0};
};

using FaultTable = absl::flat_hash_map<std::string, std::unique_ptr<FaultPoint>>;

FaultTable ParseFaultTable(absl::string_view spec) {
  FaultTable table;
  for (absl::string_view entry : absl::StrSplit(spec, ',', absl::SkipWhitespace())) {
    auto point = std::make_unique<FaultPoint>();
    const std::pair<absl::string_view, absl::string_view> parts = absl::StrSplit(entry, absl::MaxSplits('@', 1));
    const std::pair<absl::string_view, absl::string_view> range = absl::StrSplit(parts.second, '-');
    int64_t first = 0, last = 0;
    if (absl::SimpleAtoi(range.first, &first) && first > 0) point->first_firing_check = first;
    if (absl::SimpleAtoi(range.second, &last) && last >= point->first_firing_check) point->last_firing_check = last;
    table[std::string(absl::StripAsciiWhitespace(parts.first))] = std::move(point);
  }
  return table;
}

std::atomic<const FaultTable*>& CurrentTable() {
  static std::atomic<const FaultTable*> table{[] {
    const char* spec = std::getenv("LLMC_FAULT_INJECTION");
    return new FaultTable(ParseFaultTable(spec == nullptr ? "" : spec));
  }()};
  return table;
}

}  // namespace

void SetFaultInjectionForTesting(absl::string_view spec) {
  // Old tables are kept, not freed: a check on another thread may still be reading one.
  static absl::Mutex mu;
  static auto* retired = new std::vector<std::unique_ptr<const FaultTable>>();
  absl::MutexLock lock(&mu);
  retired->emplace_back(CurrentTable().exchange(new FaultTable(ParseFaultTable(spec))));
}

bool FaultInjected(absl::string_view point) {
  const FaultTable* table = CurrentTable().load(std::memory_order_acquire);
  if (table->empty()) return false;
  auto it = table->find(point);
  if (it == table->end()) return false;
  const int64_t check = it->second->checks.fetch_add(1) + 1;
  return check >= it->second->first_firing_check && check <= it->second->last_firing_check;
}

}  // namespace llmc
