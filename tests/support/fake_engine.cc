#include "tests/support/fake_engine.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace llmc::testing {

FakeEngine::FakeEngine(FakeEngineOptions options) : options_(options), manifest_(Manifest()) {}

FakeEngine::~FakeEngine() { Stop(); }

model::ModelManifest FakeEngine::Manifest() {
  model::ModelManifest manifest;
  manifest.name = "fake-model";
  manifest.architecture = "fake";
  manifest.dtype = "float32";
  manifest.chat_template = "chatml";
  manifest.vocab_size = 300;
  manifest.max_context_length = 4096;
  manifest.eos_token_ids = {256};
  return manifest;
}

void FakeEngine::FailAfter(const std::string& request_id, uint32_t tokens, absl::Status status) {
  absl::MutexLock lock(&mu_);
  failures_[request_id] = {tokens, std::move(status)};
}

void FakeEngine::ScriptStepDelays(std::vector<absl::Duration> delays) {
  absl::MutexLock lock(&mu_);
  scripted_delays_.assign(delays.begin(), delays.end());
}

void FakeEngine::SetPaused(bool paused) {
  absl::MutexLock lock(&mu_);
  paused_ = paused;
}

std::vector<uint64_t> FakeEngine::aborted_ids() const {
  absl::MutexLock lock(&mu_);
  return aborted_;
}

std::vector<engine::GenerationRequest> FakeEngine::submitted() const {
  absl::MutexLock lock(&mu_);
  return submitted_;
}

std::vector<uint64_t> FakeEngine::submitted_ids() const {
  absl::MutexLock lock(&mu_);
  return submitted_ids_;
}

absl::Status FakeEngine::Start() {
  thread_ = std::thread([this] { Run(); });
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> FakeEngine::Submit(engine::GenerationRequest request,
                                            std::shared_ptr<engine::GenerationSink> sink) {
  if (request.prompt_token_ids.empty()) return absl::InvalidArgumentError("the prompt is empty");
  absl::MutexLock lock(&mu_);
  if (!accepting_ || stopping_) return absl::UnavailableError("the engine is not accepting requests");
  if (static_cast<int64_t>(active_.size()) + delivering_ >= options_.max_unfinished) {
    return absl::ResourceExhaustedError(absl::StrCat("the waiting queue is full (", options_.max_unfinished, ")"));
  }
  const uint64_t id = next_id_++;
  submitted_.push_back(request);
  submitted_ids_.push_back(id);
  active_[id] = Active{std::move(request), std::move(sink)};
  return id;
}

void FakeEngine::Abort(uint64_t id) {
  absl::MutexLock lock(&mu_);
  aborted_.push_back(id);
  if (auto it = active_.find(id); it != active_.end()) it->second.aborted = true;
}

void FakeEngine::StopAccepting() {
  absl::MutexLock lock(&mu_);
  accepting_ = false;
}

int64_t FakeEngine::NumUnfinished() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int64_t>(active_.size()) + delivering_;
}

engine::EngineLoad FakeEngine::Load() const {
  absl::MutexLock lock(&mu_);
  engine::EngineLoad load;
  load.num_running = static_cast<int64_t>(active_.size());
  load.max_running = options_.max_unfinished;
  load.max_waiting = options_.max_unfinished;
  load.num_kv_blocks = 100;
  load.num_kv_blocks_used = std::min<int64_t>(100, static_cast<int64_t>(active_.size()));
  return load;
}

void FakeEngine::Stop() {
  std::map<uint64_t, Active> left;
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
  {
    absl::MutexLock lock(&mu_);
    left.swap(active_);
  }
  for (auto& [id, active] : left) active.sink->OnDone(absl::UnavailableError("the engine stopped"));
}

void FakeEngine::Advance(Active& active, Delivery& delivery) const {
  const engine::GenerationRequest& request = active.request;
  if (active.aborted) {
    delivery.done = absl::CancelledError("aborted");
    return;
  }
  if (absl::Now() > request.deadline) {
    delivery.done = absl::DeadlineExceededError("the request's deadline passed");
    return;
  }
  if (auto failure = failures_.find(request.request_id);
      failure != failures_.end() && active.generated >= failure->second.first) {
    delivery.done = failure->second.second;
    return;
  }
  const uint32_t index = active.generated++;
  const size_t prompt_length = request.prompt_token_ids.size();
  const bool stop = index + 1 >= prompt_length;
  const bool length = index + 1 >= request.sampling.max_tokens;
  v1::GenerateResponse response;
  for (uint32_t choice = 0; choice < request.sampling.n; ++choice) {
    v1::TokenDelta* delta = response.add_deltas();
    const int32_t token = request.prompt_token_ids[index % prompt_length];
    delta->set_choice_index(choice);
    delta->set_index(index);
    delta->add_token_ids(token);
    delta->set_text(absl::StrCat(token, " "));
    if (stop || length) delta->set_finish_reason(stop ? v1::FINISH_REASON_STOP : v1::FINISH_REASON_LENGTH);
  }
  if (stop || length) {
    const uint32_t completion = active.generated * request.sampling.n;
    response.mutable_usage()->set_prompt_tokens(static_cast<uint32_t>(prompt_length));
    response.mutable_usage()->set_completion_tokens(completion);
    response.mutable_usage()->set_total_tokens(static_cast<uint32_t>(prompt_length) + completion);
    delivery.done = absl::OkStatus();
  }
  delivery.response = std::move(response);
}

void FakeEngine::Run() {
  while (true) {
    absl::Duration delay = options_.step_delay;
    {
      absl::MutexLock lock(&mu_);
      if (!scripted_delays_.empty()) {
        delay = scripted_delays_.front();
        scripted_delays_.pop_front();
      }
      auto stopping = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_; };
      mu_.AwaitWithTimeout(absl::Condition(&stopping), delay);
      if (stopping_) return;
      if (paused_) continue;
    }
    std::vector<Delivery> deliveries;
    {
      absl::MutexLock lock(&mu_);
      for (auto it = active_.begin(); it != active_.end();) {
        Delivery& delivery = deliveries.emplace_back();
        delivery.sink = it->second.sink;
        Advance(it->second, delivery);
        if (delivery.done.has_value()) {
          ++delivering_;
          it = active_.erase(it);
        } else {
          ++it;
        }
      }
    }
    for (Delivery& delivery : deliveries) {
      if (delivery.response.has_value()) delivery.sink->OnResponse(*std::move(delivery.response));
      if (delivery.done.has_value()) {
        delivery.sink->OnDone(*delivery.done);
        absl::MutexLock lock(&mu_);
        --delivering_;
      }
    }
  }
}

}  // namespace llmc::testing
