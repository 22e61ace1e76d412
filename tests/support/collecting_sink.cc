#include "tests/support/collecting_sink.h"

namespace llmc::testing {

void CollectingSink::OnResponse(v1::GenerateResponse response) {
  absl::MutexLock lock(&mu_);
  ++num_responses_;
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
