#include "worker/engine/admit_action.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace llmc::engine {

bool AdmitAction::Run(absl::Duration idle_wait) {
  RequestInbox::Inputs inputs = inbox_.Take(/*idle=*/table_.empty(), idle_wait);
  if (inputs.stopping) return false;
  for (auto& group : inputs.groups) table_.Add(std::move(group));
  for (const uint64_t id : inputs.aborts) {
    if (RequestGroup* group = table_.Find(id); group != nullptr) {
      table_.EndEarly(*group, absl::CancelledError("the request was cancelled"), v1::FINISH_REASON_ABORT);
    }
  }
  ExpireDeadlines();
  return true;
}

void AdmitAction::ExpireDeadlines() {
  const absl::Time now = absl::Now();
  for (const uint64_t id : table_.ids()) {
    RequestGroup& group = *table_.Find(id);
    if (group.request.deadline >= now) continue;
    table_.EndEarly(group,
                    absl::DeadlineExceededError(absl::StrCat("the request's deadline passed after ",
                                                             group.completion_tokens(), " generated tokens")),
                    v1::FINISH_REASON_ABORT);
  }
}

}  // namespace llmc::engine
