#include "worker/model/cpu/logit_masks.h"

namespace llmc::model::cpu {
namespace {

thread_local const std::vector<const uint64_t*>* current_masks = nullptr;

}  // namespace

ScopedLogitMasks::ScopedLogitMasks(const std::vector<const uint64_t*>* masks) : previous_(current_masks) {
  current_masks = masks;
}

ScopedLogitMasks::~ScopedLogitMasks() { current_masks = previous_; }

const std::vector<const uint64_t*>* CurrentLogitMasks() { return current_masks; }

}  // namespace llmc::model::cpu
