#ifndef LLMC_TESTS_SUPPORT_COLLECTING_SINK_H_
#define LLMC_TESTS_SUPPORT_COLLECTING_SINK_H_

#include <map>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "worker/engine/generation.h"

namespace llmc::testing {

// A GenerationSink that reassembles each choice's tokens, text, logprobs and finish, and checks that delta
// indices run on without gaps.
class CollectingSink : public engine::GenerationSink {
 public:
  struct Choice {
    std::vector<int32_t> tokens;
    std::string text;
    std::vector<v1::TokenLogprob> logprobs;
    v1::FinishReason finish_reason = v1::FINISH_REASON_UNSPECIFIED;
    std::string stop_reason;
  };

  void OnResponse(v1::GenerateResponse response) override;
  void OnDone(absl::Status status) override;

  // False when OnDone did not come within `timeout`.
  bool WaitDone(absl::Duration timeout = absl::Seconds(120));
  absl::Status status();
  Choice choice(uint32_t index);
  v1::Usage usage();
  // The prompt logprobs of the last response that carried any, how many did, and whether they came with
  // choice 0's first token and before any other.
  std::vector<v1::TokenLogprob> prompt_logprobs();
  int num_prompt_logprob_responses();
  bool prompt_logprobs_came_first();
  // An embedding request's vector (empty for a generation).
  std::vector<float> embedding();
  int num_responses();
  int num_done_calls();
  bool indices_contiguous();

 private:
  absl::Mutex mu_;
  std::map<uint32_t, Choice> choices_ ABSL_GUARDED_BY(mu_);
  v1::Usage usage_ ABSL_GUARDED_BY(mu_);
  std::vector<float> embedding_ ABSL_GUARDED_BY(mu_);
  std::vector<v1::TokenLogprob> prompt_logprobs_ ABSL_GUARDED_BY(mu_);
  int num_prompt_logprob_responses_ ABSL_GUARDED_BY(mu_) = 0;
  bool prompt_logprobs_came_first_ ABSL_GUARDED_BY(mu_) = true;
  absl::Status status_ ABSL_GUARDED_BY(mu_);
  int num_responses_ ABSL_GUARDED_BY(mu_) = 0;
  int num_done_calls_ ABSL_GUARDED_BY(mu_) = 0;
  bool indices_contiguous_ ABSL_GUARDED_BY(mu_) = true;
  absl::Notification done_;
};

}  // namespace llmc::testing

#endif  // LLMC_TESTS_SUPPORT_COLLECTING_SINK_H_
