#include "worker/engine/request_table.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "worker/engine/constraint_state.h"

namespace llmc::engine {

void RequestTable::Add(std::unique_ptr<RequestGroup> group) {
  // Beam search starts from one beam; its first selection forks the others off it.
  if (group->request.sampling.beam_search()) group->beam = std::make_unique<BeamSearchState>();
  const uint32_t n = group->beam != nullptr ? 1 : group->request.sampling.n;
  if (group->request.constraint) group->constraint = std::make_unique<ConstraintState>(group->request.constraint, n);
  for (uint32_t choice = 0; choice < n; ++choice) {
    group->sequences.push_back(std::make_unique<Sequence>(*group, choice, tokenizer_));
    scheduler_.AddWaiting(group->sequences.back().get());
  }
  const uint64_t id = group->id;
  groups_.emplace(id, std::move(group));
}

RequestGroup* RequestTable::Find(uint64_t id) {
  auto it = groups_.find(id);
  return it == groups_.end() ? nullptr : it->second.get();
}

std::vector<uint64_t> RequestTable::ids() const {
  std::vector<uint64_t> ids;
  ids.reserve(groups_.size());
  for (const auto& [id, group] : groups_) ids.push_back(id);
  std::sort(ids.begin(), ids.end());
  return ids;
}

void RequestTable::MarkRunning(RequestGroup& group) {
  if (group.running) return;
  group.running = true;
  inbox_.StartedRunning();
}

void RequestTable::FinishChoice(Sequence& sequence, v1::FinishReason reason) {
  scheduler_.Remove(&sequence);
  sequence.finish_reason = reason;
}

void RequestTable::Respond(RequestGroup& group, v1::GenerateResponse response, v1::FinishReason reason) {
  if (group.num_unfinished() > 0) {
    outbox_.push_back({group.sink, std::move(response), std::nullopt});
    return;
  }
  const int64_t prompt_tokens = group.prompt_tokens();
  const int64_t completion_tokens = group.completion_tokens();
  v1::Usage* usage = response.mutable_usage();
  usage->set_prompt_tokens(static_cast<uint32_t>(prompt_tokens));
  usage->set_completion_tokens(static_cast<uint32_t>(completion_tokens));
  usage->set_total_tokens(static_cast<uint32_t>(prompt_tokens + completion_tokens));
  usage->set_cached_prompt_tokens(static_cast<uint32_t>(group.cached_prompt_tokens()));
  if (observer_ != nullptr) {
    observer_->OnRequestFinished(prompt_tokens, completion_tokens, reason, absl::Now() - group.arrival_time);
  }
  outbox_.push_back({group.sink, std::move(response), absl::OkStatus()});
  Erase(group);
}

void RequestTable::EndEarly(RequestGroup& group, const absl::Status& status, v1::FinishReason reason) {
  for (auto& sequence : group.sequences) {
    if (!sequence->finished()) FinishChoice(*sequence, reason);
  }
  if (observer_ != nullptr) {
    observer_->OnRequestFinished(group.prompt_tokens(), group.completion_tokens(), reason,
                                 absl::Now() - group.arrival_time);
  }
  outbox_.push_back({group.sink, std::nullopt, status, group.request.request_id,
                     absl::StrCat("request ended early: ", status.ToString())});
  Erase(group);
}

void RequestTable::EndAll(const absl::Status& status) {
  for (const uint64_t id : ids()) EndEarly(*groups_.at(id), status, v1::FINISH_REASON_ABORT);
}

void RequestTable::LogError(std::string line) {
  outbox_.push_back({nullptr, std::nullopt, std::nullopt, "", std::move(line), /*log_as_error=*/true});
}

void RequestTable::Notify(std::function<void()> notice) {
  outbox_.push_back({nullptr, std::nullopt, std::nullopt, "", "", false, std::move(notice)});
}

std::vector<Delivery> RequestTable::TakeDeliveries() {
  std::vector<Delivery> deliveries;
  deliveries.swap(outbox_);
  return deliveries;
}

void RequestTable::Erase(RequestGroup& group) {
  inbox_.Ended(group.running);
  groups_.erase(group.id);
}

}  // namespace llmc::engine
