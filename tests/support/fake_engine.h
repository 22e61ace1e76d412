#ifndef LLMC_TESTS_SUPPORT_FAKE_ENGINE_H_
#define LLMC_TESTS_SUPPORT_FAKE_ENGINE_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "worker/engine/engine.h"

namespace llmc::testing {

struct FakeEngineOptions {
  int64_t max_unfinished = 64;  // Submit beyond this many unfinished requests: RESOURCE_EXHAUSTED
  int64_t max_model_len = 4096;
  absl::Duration step_delay = absl::Milliseconds(1);
};

// An Engine for unit tests, behind the real interface. Each step, on its own thread, every request emits
// one token per choice: its prompt echoed back, token i being prompt[i]. A choice finishes with STOP after
// echoing the whole prompt, or with LENGTH at max_tokens; the last response carries usage. Delays, failures
// and the queue limit are scripted; Abort calls are recorded. Text of a token is "<id> ".
class FakeEngine final : public engine::Engine {
 public:
  explicit FakeEngine(FakeEngineOptions options = {});
  ~FakeEngine() override;

  // The manifest the fake reports: "fake-model", vocabulary 300, chatml, EOS 256.
  static model::ModelManifest Manifest();

  // The request whose request_id is `request_id` ends with `status` once each choice has emitted `tokens`.
  void FailAfter(const std::string& request_id, uint32_t tokens, absl::Status status);
  // Delays of the next steps, one each, before falling back to the options' step_delay.
  void ScriptStepDelays(std::vector<absl::Duration> delays);
  // While paused no step runs: submitted requests stay unfinished.
  void SetPaused(bool paused);
  std::vector<uint64_t> aborted_ids() const;
  std::vector<engine::GenerationRequest> submitted() const;
  std::vector<uint64_t> submitted_ids() const;

  absl::Status Start() override;
  absl::StatusOr<uint64_t> Submit(engine::GenerationRequest request,
                                  std::shared_ptr<engine::GenerationSink> sink) override;
  void Abort(uint64_t id) override;
  void StopAccepting() override;
  absl::Status Health() const override { return absl::OkStatus(); }
  void SetUnhealthyListener(std::function<void(const absl::Status&)> listener) override {}
  int64_t NumUnfinished() const override;
  engine::EngineLoad Load() const override;
  void Stop() override;
  int64_t max_model_len() const override { return options_.max_model_len; }
  const model::ModelManifest& manifest() const override { return manifest_; }
  std::string device() const override { return "cpu"; }
  std::string dtype() const override { return "float32"; }

 private:
  struct Active {
    engine::GenerationRequest request;
    std::shared_ptr<engine::GenerationSink> sink;
    uint32_t generated = 0;  // per choice
    bool aborted = false;
  };
  // What one step hands to one sink, delivered outside the lock.
  struct Delivery {
    std::shared_ptr<engine::GenerationSink> sink;
    std::optional<v1::GenerateResponse> response;
    std::optional<absl::Status> done;
  };

  void Run();
  void Advance(Active& active, Delivery& delivery) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const FakeEngineOptions options_;
  const model::ModelManifest manifest_;
  mutable absl::Mutex mu_;
  std::map<uint64_t, Active> active_ ABSL_GUARDED_BY(mu_);
  int64_t delivering_ ABSL_GUARDED_BY(mu_) = 0;  // finished in this step, OnDone not yet delivered
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  bool accepting_ ABSL_GUARDED_BY(mu_) = true;
  bool paused_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::deque<absl::Duration> scripted_delays_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, std::pair<uint32_t, absl::Status>> failures_ ABSL_GUARDED_BY(mu_);
  std::vector<uint64_t> aborted_ ABSL_GUARDED_BY(mu_);
  std::vector<engine::GenerationRequest> submitted_ ABSL_GUARDED_BY(mu_);
  std::vector<uint64_t> submitted_ids_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace llmc::testing

#endif  // LLMC_TESTS_SUPPORT_FAKE_ENGINE_H_
