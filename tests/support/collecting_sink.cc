#include "tests/support/collecting_sink.h"

#include <algorithm>

namespace llmc::testing {

void CollectingSink::OnResponse(v1::GenerateResponse response) {
  absl::MutexLock lock(&mu_);
  ++num_responses_;
  if (!response.prompt_logprobs().empty()) {
    ++num_prompt_logprob_responses_;
    // They must come with choice 0's first token, before any other token of the request.
    for (const auto& [index, choice] : choices_) {
      if (!choice.tokens.empty()) prompt_logprobs_came_first_ = false;
    }
    const bool with_first_token =
        std::any_of(response.deltas().begin(), response.deltas().end(),
                    [](const v1::TokenDelta& d) { return d.choice_index() == 0 && d.index() == 0; });
    if (!with_first_token) prompt_logprobs_came_first_ = false;
    prompt_logprobs_.assign(response.prompt_logprobs().begin(), response.prompt_logprobs().end());
  }
  for (const v1::TokenDelta& delta : response.deltas()) {
    Choice& choice = choices_[delta.choice_index()];
    if (delta.index() != choice.tokens.size()) indices_contiguous_ = false;
    choice.tokens.insert(choice.tokens.end(), delta.token_ids().begin(), delta.token_ids().end());
    choice.text += delta.text();
    choice.logprobs.insert(choice.logprobs.end(), delta.logprobs().begin(), delta.logprobs().end());
    if (delta.finish_reason() != v1::FINISH_REASON_UNSPECIFIED) {
      choice.finish_reason = delta.finish_reason();
      choice.stop_reason = delta.stop_reason();
    }
  }
  if (response.has_usage()) usage_ = response.usage();
  embedding_.insert(embedding_.end(), response.embedding().begin(), response.embedding().end());
}

void CollectingSink::OnDone(absl::Status status) {
  absl::MutexLock lock(&mu_);
  status_ = std::move(status);
  if (++num_done_calls_ == 1) done_.Notify();
}

bool CollectingSink::WaitDone(absl::Duration timeout) { return done_.WaitForNotificationWithTimeout(timeout); }

absl::Status CollectingSink::status() {
  absl::MutexLock lock(&mu_);
  return status_;
}

CollectingSink::Choice CollectingSink::choice(uint32_t index) {
  absl::MutexLock lock(&mu_);
  return choices_[index];
}

v1::Usage CollectingSink::usage() {
  absl::MutexLock lock(&mu_);
  return usage_;
}

std::vector<v1::TokenLogprob> CollectingSink::prompt_logprobs() {
  absl::MutexLock lock(&mu_);
  return prompt_logprobs_;
}

int CollectingSink::num_prompt_logprob_responses() {
  absl::MutexLock lock(&mu_);
  return num_prompt_logprob_responses_;
}

bool CollectingSink::prompt_logprobs_came_first() {
  absl::MutexLock lock(&mu_);
  return prompt_logprobs_came_first_;
}

std::vector<float> CollectingSink::embedding() {
  absl::MutexLock lock(&mu_);
  return embedding_;
}

int CollectingSink::num_responses() {
  absl::MutexLock lock(&mu_);
  return num_responses_;
}

int CollectingSink::num_done_calls() {
  absl::MutexLock lock(&mu_);
  return num_done_calls_;
}

bool CollectingSink::indices_contiguous() {
  absl::MutexLock lock(&mu_);
  return indices_contiguous_;
}

}  // namespace llmc::testing
