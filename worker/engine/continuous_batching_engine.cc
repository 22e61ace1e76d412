#include "worker/engine/continuous_batching_engine.h"

#include <c10/core/InferenceMode.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "worker/engine/device_memory.h"

namespace llmc::engine {
namespace {

// A step's tokens-per-second figure covers at least this much wall time, and goes stale after twice it.
constexpr absl::Duration kRateWindow = absl::Seconds(1);

}  // namespace

absl::StatusOr<std::unique_ptr<Engine>> Engine::Create(std::unique_ptr<model::LoadedModel> model,
                                                       const tokenizer::Tokenizer& tokenizer,
                                                       const EngineOptions& options, EngineObserver* observer) {
  if (model == nullptr) return absl::InvalidArgumentError("the engine needs a model");
  const model::ModelManifest& manifest = model->manifest();
  EngineOptions resolved = options;
  if (resolved.max_model_len > manifest.max_context_length) {
    return absl::InvalidArgumentError(absl::StrCat(
        "max_model_len ", resolved.max_model_len, " exceeds the model's context length ", manifest.max_context_length));
  }
  if (resolved.max_model_len <= 0) resolved.max_model_len = manifest.max_context_length;
  if (resolved.block_size <= 0 || resolved.max_running <= 0 || resolved.max_waiting <= 0 ||
      resolved.max_num_batched_tokens < resolved.max_running) {
    return absl::InvalidArgumentError("engine limits must be positive, with max_num_batched_tokens >= max_running");
  }

  const int64_t block_bytes = model->KvCacheBlockBytes(resolved.block_size);
  int64_t budget = resolved.kv_cache_bytes;
  if (budget <= 0) {
    ASSIGN_OR_RETURN(const int64_t available, AvailableDeviceMemory(model->device()));
    budget = static_cast<int64_t>(static_cast<double>(available) * resolved.kv_cache_memory_fraction);
  }
  // More blocks than max_running full-length sequences can use would only cost memory.
  const int64_t useful_blocks = resolved.max_running * BlocksFor(resolved.max_model_len, resolved.block_size);
  const int64_t num_blocks = std::min(budget / block_bytes, useful_blocks);
  if (num_blocks < 1) {
    return absl::ResourceExhaustedError(absl::StrCat("a KV cache budget of ", budget,
                                                     " bytes holds no block; one block of ", resolved.block_size,
                                                     " tokens takes ", block_bytes, " bytes"));
  }
  const int64_t cache_tokens = num_blocks * resolved.block_size;
  if (resolved.max_model_len > cache_tokens) {
    LLMC_LOG(Warning) << "max_model_len lowered from " << resolved.max_model_len << " to " << cache_tokens
                      << ", what the KV cache holds";
    resolved.max_model_len = cache_tokens;
  }
  ASSIGN_OR_RETURN(at::Tensor kv_cache, model->AllocateKvCache(num_blocks, resolved.block_size));
  LLMC_LOG(Info) << "KV cache allocated: " << num_blocks << " blocks of " << resolved.block_size << " tokens, "
                 << num_blocks * block_bytes << " bytes; max_model_len " << resolved.max_model_len;
  return std::unique_ptr<Engine>(new ContinuousBatchingEngine(
      std::move(model), tokenizer, resolved, static_cast<int32_t>(num_blocks), std::move(kv_cache), observer));
}

ContinuousBatchingEngine::ContinuousBatchingEngine(std::unique_ptr<model::LoadedModel> model,
                                                   const tokenizer::Tokenizer& tokenizer, const EngineOptions& options,
                                                   int32_t num_blocks, at::Tensor kv_cache, EngineObserver* observer)
    : model_(std::move(model)),
      tokenizer_(tokenizer),
      options_(options),
      observer_(observer),
      kv_cache_(std::move(kv_cache)),
      allocator_(num_blocks),
      scheduler_(allocator_, {options.block_size, options.max_num_batched_tokens, options.max_running}),
      batch_builder_(options.block_size, options.max_num_batched_tokens, options.max_running),
      output_(tokenizer, model_->manifest(), options.max_model_len) {
  load_.num_kv_blocks = num_blocks;
  load_.max_running = options.max_running;
  load_.max_waiting = options.max_waiting;
}

ContinuousBatchingEngine::~ContinuousBatchingEngine() { Stop(); }

std::string ContinuousBatchingEngine::dtype() const {
  return model_->dtype() == at::kBFloat16 ? "bfloat16" : "float32";
}

absl::Status ContinuousBatchingEngine::Start() {
  // One token through every layer: kernels, allocator pools and lazy initialisation are warm before the
  // first request. Its K/V land in a free block that any later owner overwrites before reading.
  std::vector<int64_t> ids = {0}, positions = {0}, slots = {0}, logits_rows = {0};
  std::vector<int32_t> table = {0}, lengths = {1}, starts = {0, 1};
  const auto view = [](auto& values, at::ScalarType type) {
    return at::from_blob(values.data(), {static_cast<int64_t>(values.size())}, at::TensorOptions().dtype(type));
  };
  model::ForwardBatch warm_up{view(ids, at::kLong),        view(positions, at::kLong),
                              view(slots, at::kLong),      view(table, at::kInt).view({1, 1}),
                              view(lengths, at::kInt),     view(starts, at::kInt),
                              view(logits_rows, at::kLong)};
  {
    c10::InferenceMode inference;
    const absl::Time start = absl::Now();
    RETURN_IF_ERROR(
        Annotate(model_->ForwardForSampling(warm_up, kv_cache_, at::empty({0}, at::kLong), /*top_k=*/1).status(),
                 "warm-up step"));
    LLMC_LOG(Info) << "warm-up step took " << absl::FormatDuration(absl::Now() - start);
  }
  absl::MutexLock lock(&mu_);
  if (stopping_) return absl::UnavailableError("the engine was stopped");
  if (thread_.joinable()) return absl::FailedPreconditionError("the engine is already running");
  accepting_ = true;
  thread_ = std::thread([this] { Run(); });
  return absl::OkStatus();
}

absl::Status ContinuousBatchingEngine::Validate(const GenerationRequest& request) const {
  const SamplingOptions& sampling = request.sampling;
  const int64_t prompt_length = static_cast<int64_t>(request.prompt_token_ids.size());
  if (prompt_length == 0) return absl::InvalidArgumentError("the prompt is empty");
  const int64_t vocab_size = model_->manifest().vocab_size;
  for (const int32_t id : request.prompt_token_ids) {
    if (id < 0 || id >= vocab_size) {
      return absl::InvalidArgumentError(
          absl::StrCat("prompt token id ", id, " is outside the vocabulary [0, ", vocab_size, ")"));
    }
  }
  for (const int32_t id : sampling.stop_token_ids) {
    if (id < 0 || id >= vocab_size) {
      return absl::InvalidArgumentError(
          absl::StrCat("stop token id ", id, " is outside the vocabulary [0, ", vocab_size, ")"));
    }
  }
  if (sampling.n < 1) return absl::InvalidArgumentError("n must be at least 1");
  if (sampling.max_tokens < 1) return absl::InvalidArgumentError("max_tokens must be at least 1");
  if (prompt_length + sampling.max_tokens > options_.max_model_len) {
    return absl::InvalidArgumentError(absl::StrCat("this model's maximum context length is ", options_.max_model_len,
                                                   " tokens, but ", prompt_length + sampling.max_tokens,
                                                   " were requested (", prompt_length, " in the prompt, ",
                                                   sampling.max_tokens, " for the completion)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> ContinuousBatchingEngine::Submit(GenerationRequest request,
                                                          std::shared_ptr<GenerationSink> sink) {
  RETURN_IF_ERROR(Validate(request));
  auto group = std::make_unique<RequestGroup>();
  group->request = std::move(request);
  group->sink = std::move(sink);
  group->arrival_time = absl::Now();
  absl::MutexLock lock(&mu_);
  if (!accepting_) {
    return absl::UnavailableError(stopping_            ? "the engine has stopped"
                                  : thread_.joinable() ? "the worker is draining and takes no new requests"
                                                       : "the engine is not started yet");
  }
  if (num_queued_requests_ >= options_.max_waiting) {
    return absl::ResourceExhaustedError(
        absl::StrCat("the waiting queue is full (", options_.max_waiting, " requests); try another worker"));
  }
  group->id = next_id_++;
  const uint64_t id = group->id;
  incoming_.push_back(std::move(group));
  ++num_queued_requests_;
  num_unfinished_.fetch_add(1);
  return id;
}

void ContinuousBatchingEngine::Abort(uint64_t id) {
  absl::MutexLock lock(&mu_);
  aborts_.push_back(id);
}

void ContinuousBatchingEngine::StopAccepting() {
  absl::MutexLock lock(&mu_);
  accepting_ = false;
}

EngineLoad ContinuousBatchingEngine::Load() const {
  EngineLoad load;
  {
    absl::MutexLock lock(&load_mu_);
    load = load_;
    // An idle engine publishes nothing, so an old rate means no recent tokens.
    if (absl::Now() - load_rate_time_ > 2 * kRateWindow) load.tokens_per_second = 0;
  }
  absl::MutexLock lock(&mu_);
  load.num_waiting += static_cast<int64_t>(incoming_.size());
  return load;
}

void ContinuousBatchingEngine::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    accepting_ = false;
  }
  if (thread_.joinable()) thread_.join();
  // Requests submitted but never taken by the engine thread (or the thread never started).
  std::vector<std::unique_ptr<RequestGroup>> leftovers;
  {
    absl::MutexLock lock(&mu_);
    leftovers.swap(incoming_);
    num_queued_requests_ = 0;
  }
  std::vector<Delivery> refusals;
  for (auto& group : leftovers) {
    refusals.push_back(
        {std::move(group->sink), std::nullopt, absl::UnavailableError("the engine stopped before the request ran")});
    num_unfinished_.fetch_sub(1);
  }
  delivery_.Push(std::move(refusals));
  delivery_.Flush();
}

void ContinuousBatchingEngine::Run() {
  c10::InferenceMode inference;
  model_->ReserveStepBuffers(options_.max_num_batched_tokens, options_.max_running, kMaxTopLogitsForSampling);
  while (TakeInputs()) {
    ExpireDeadlines();
    // Cancellations and expiries are told before the step, not after it.
    delivery_.Push(std::move(deliveries_));
    deliveries_.clear();
    Step();
    delivery_.Push(std::move(deliveries_));
    deliveries_.clear();
  }
  std::vector<uint64_t> ids;
  for (const auto& [id, group] : groups_) ids.push_back(id);
  for (const uint64_t id : ids) {
    EndEarly(*groups_.at(id), absl::UnavailableError("the engine stopped"), v1::FINISH_REASON_ABORT);
  }
  delivery_.Push(std::move(deliveries_));
}

bool ContinuousBatchingEngine::TakeInputs() {
  std::vector<std::unique_ptr<RequestGroup>> incoming;
  std::vector<uint64_t> aborts;
  {
    absl::MutexLock lock(&mu_);
    const auto has_input = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return !incoming_.empty() || !aborts_.empty() || stopping_;
    };
    if (groups_.empty()) {
      // Idle: sleep until something arrives. The timeout only bounds the wait.
      mu_.AwaitWithTimeout(absl::Condition(&has_input), absl::Milliseconds(200));
    }
    if (stopping_) return false;
    incoming.swap(incoming_);
    aborts.swap(aborts_);
  }
  for (auto& group : incoming) {
    const uint32_t n = group->request.sampling.n;
    for (uint32_t choice = 0; choice < n; ++choice) {
      group->sequences.push_back(std::make_unique<Sequence>(*group, choice, tokenizer_));
      scheduler_.AddWaiting(group->sequences.back().get());
    }
    group->num_unfinished = static_cast<int>(n);
    const uint64_t id = group->id;
    groups_.emplace(id, std::move(group));
  }
  for (const uint64_t id : aborts) {
    if (auto it = groups_.find(id); it != groups_.end()) {
      EndEarly(*it->second, absl::CancelledError("the request was cancelled"), v1::FINISH_REASON_ABORT);
    }
  }
  return true;
}

void ContinuousBatchingEngine::ExpireDeadlines() {
  const absl::Time now = absl::Now();
  std::vector<uint64_t> expired;
  for (const auto& [id, group] : groups_) {
    if (group->request.deadline < now) expired.push_back(id);
  }
  for (const uint64_t id : expired) {
    RequestGroup& group = *groups_.at(id);
    EndEarly(group,
             absl::DeadlineExceededError(
                 absl::StrCat("the request's deadline passed after ", group.completion_tokens, " generated tokens")),
             v1::FINISH_REASON_ABORT);
  }
}

void ContinuousBatchingEngine::EndEarly(RequestGroup& group, const absl::Status& status, v1::FinishReason reason) {
  for (auto& sequence : group.sequences) {
    if (sequence->finished()) continue;
    scheduler_.Remove(sequence.get());
    sequence->state = reason == v1::FINISH_REASON_ABORT ? SequenceState::kCancelled : SequenceState::kFailed;
  }
  if (observer_ != nullptr) {
    observer_->OnRequestFinished(static_cast<int64_t>(group.request.prompt_token_ids.size()), group.completion_tokens,
                                 reason, absl::Now() - group.arrival_time);
  }
  deliveries_.push_back({group.sink, std::nullopt, status, group.request.request_id,
                         absl::StrCat("request ended early: ", status.ToString())});
  EndGroup(group.id);
}

void ContinuousBatchingEngine::EndGroup(uint64_t id) {
  auto it = groups_.find(id);
  if (it->second->counted_as_waiting) {
    absl::MutexLock lock(&mu_);
    --num_queued_requests_;
  }
  groups_.erase(it);
  num_unfinished_.fetch_sub(1);
}

void ContinuousBatchingEngine::Step() {
  const absl::Time start = absl::Now();
  const SchedulerOutput plan = scheduler_.Schedule();
  num_preemptions_ += static_cast<int64_t>(plan.preempted.size());
  if (observer_ != nullptr) {
    for (size_t i = 0; i < plan.preempted.size(); ++i) observer_->OnPreemption();
  }
  int64_t newly_running = 0;
  for (const ScheduledChunk& chunk : plan.chunks) {
    RequestGroup& group = chunk.sequence->group;
    if (group.counted_as_waiting) {
      group.counted_as_waiting = false;
      ++newly_running;
    }
  }
  if (newly_running > 0) {
    absl::MutexLock lock(&mu_);
    num_queued_requests_ -= newly_running;
  }
  if (plan.empty()) {
    PublishLoad(0);
    if (!groups_.empty()) absl::SleepFor(absl::Milliseconds(1));  // nothing fits yet; never spin hot
    return;
  }

  std::vector<Sequence*> sampled_sequences;
  std::vector<SampledToken> sampled;
  absl::Duration model_time;
  if (!ForwardAndSample(plan, sampled_sequences, sampled, model_time)) return;

  const absl::Time now = absl::Now();
  std::vector<RequestGroup*> touched;
  for (size_t k = 0; k < sampled_sequences.size(); ++k) {
    Sequence& sequence = *sampled_sequences[k];
    RequestGroup& group = sequence.group;
    v1::TokenDelta delta = output_.Append(sequence, sampled[k]);
    if (observer_ != nullptr) {
      if (!group.first_token_sent) {
        observer_->OnFirstToken(now - group.arrival_time);
      } else if (sequence.last_token_time != absl::InfinitePast()) {
        observer_->OnInterToken(now - sequence.last_token_time);
      }
    }
    group.first_token_sent = true;
    sequence.last_token_time = now;
    ++group.completion_tokens;
    if (group.pending_response.deltas_size() == 0) touched.push_back(&group);
    if (sequence.finished()) {
      group.finish_reason = delta.finish_reason();
      scheduler_.Remove(&sequence);
      --group.num_unfinished;
    }
    *group.pending_response.add_deltas() = std::move(delta);
  }
  SendPendingResponses(touched);
  if (observer_ != nullptr) {
    observer_->OnStep({plan.num_prefill_tokens, plan.num_decode_tokens, absl::Now() - start, model_time});
  }
  PublishLoad(static_cast<int64_t>(sampled.size()));
}

bool ContinuousBatchingEngine::ForwardAndSample(const SchedulerOutput& plan, std::vector<Sequence*>& sampled_sequences,
                                                std::vector<SampledToken>& sampled, absl::Duration& model_time) {
  const model::ForwardBatch batch = batch_builder_.Build(plan.chunks);
  for (const ScheduledChunk& chunk : plan.chunks) {
    if (chunk.samples) sampled_sequences.push_back(chunk.sequence);
  }
  // Rows whose sampling reads only their largest logits skip the full float32 row: the LM head keeps their
  // top logits as it streams (greedy needs one).
  const size_t num_sampled = sampled_sequences.size();
  if (suppressed_.size() < num_sampled) suppressed_.resize(num_sampled);
  std::vector<int64_t> full_rows;
  std::vector<int64_t> top_needed(num_sampled, 0);
  int64_t top_k = 0;
  for (size_t k = 0; k < num_sampled; ++k) {
    const Sequence& sequence = *sampled_sequences[k];
    output_.SuppressedTokens(sequence, suppressed_[k]);
    top_needed[k] =
        TopLogitsNeeded(sequence.group.request.sampling, !suppressed_[k].empty(), model_->manifest().vocab_size);
    if (top_needed[k] == 0) full_rows.push_back(static_cast<int64_t>(k));
    top_k = std::max(top_k, top_needed[k]);
  }
  const absl::Time model_start = absl::Now();
  absl::StatusOr<model::SamplingLogits> logits = model_->ForwardForSampling(
      batch, kv_cache_,
      at::from_blob(full_rows.data(), {static_cast<int64_t>(full_rows.size())}, at::TensorOptions(at::kLong)), top_k);
  if (!logits.ok()) {
    FailStep(plan, absl::InternalError(logits.status().message()));
    return false;
  }
  for (const ScheduledChunk& chunk : plan.chunks) {
    chunk.sequence->num_computed += chunk.num_tokens;
    if (chunk.samples) chunk.sequence->state = SequenceState::kDecode;
  }
  try {
    // On a GPU, asynchronous errors of the step surface in these copies.
    at::Tensor full_logits = logits->full_logits.to(at::kCPU).contiguous();
    const at::Tensor top_values = logits->top_values.to(at::kCPU).contiguous();
    const at::Tensor top_ids = logits->top_ids.to(at::kCPU).contiguous();
    model_time = absl::Now() - model_start;
    std::vector<SamplerRow> rows;
    rows.reserve(num_sampled);
    for (size_t k = 0; k < num_sampled; ++k) {
      Sequence& sequence = *sampled_sequences[k];
      SamplerRow row{&sequence.group.request.sampling, &sequence.rng, sequence.prompt(), sequence.output(),
                     suppressed_[k]};
      if (top_needed[k] > 0) {
        row.top_values = top_values.data_ptr<float>() + static_cast<int64_t>(k) * top_k;
        row.top_ids = top_ids.data_ptr<int64_t>() + static_cast<int64_t>(k) * top_k;
      }
      rows.push_back(row);
    }
    sampled = sampler_.Sample(full_logits, rows);
  } catch (const std::exception& error) {  // only on inputs Validate should have refused, or a device fault
    FailStep(plan, absl::InternalError(absl::StrCat("sampling failed: ", error.what())));
    return false;
  }
  return true;
}

void ContinuousBatchingEngine::FailStep(const SchedulerOutput& plan, const absl::Status& status) {
  LLMC_LOG(Error) << "engine step failed: " << status.message();
  std::vector<uint64_t> failed;
  for (const ScheduledChunk& chunk : plan.chunks) failed.push_back(chunk.sequence->group.id);
  std::sort(failed.begin(), failed.end());
  failed.erase(std::unique(failed.begin(), failed.end()), failed.end());
  for (const uint64_t id : failed) EndEarly(*groups_.at(id), status, v1::FINISH_REASON_ERROR);
  PublishLoad(0);
}

void ContinuousBatchingEngine::SendPendingResponses(const std::vector<RequestGroup*>& touched) {
  for (RequestGroup* group : touched) {
    v1::GenerateResponse response = std::move(group->pending_response);
    group->pending_response.Clear();
    if (group->num_unfinished > 0) {
      deliveries_.push_back({group->sink, std::move(response), std::nullopt});
      continue;
    }
    const int64_t prompt_tokens = static_cast<int64_t>(group->request.prompt_token_ids.size());
    v1::Usage* usage = response.mutable_usage();
    usage->set_prompt_tokens(static_cast<uint32_t>(prompt_tokens));
    usage->set_completion_tokens(static_cast<uint32_t>(group->completion_tokens));
    usage->set_total_tokens(static_cast<uint32_t>(prompt_tokens + group->completion_tokens));
    if (observer_ != nullptr) {
      observer_->OnRequestFinished(prompt_tokens, group->completion_tokens, group->finish_reason,
                                   absl::Now() - group->arrival_time);
    }
    deliveries_.push_back({group->sink, std::move(response), absl::OkStatus()});
    EndGroup(group->id);
  }
}

void ContinuousBatchingEngine::PublishLoad(int64_t generated_tokens) {
  const absl::Time now = absl::Now();
  if (window_start_ == absl::InfinitePast()) window_start_ = now;
  window_tokens_ += generated_tokens;
  absl::MutexLock lock(&load_mu_);
  if (now - window_start_ >= kRateWindow) {
    load_.tokens_per_second = static_cast<double>(window_tokens_) / absl::ToDoubleSeconds(now - window_start_);
    load_rate_time_ = now;
    window_tokens_ = 0;
    window_start_ = now;
  }
  load_.num_waiting = scheduler_.num_waiting();
  load_.num_running = scheduler_.num_running();
  load_.num_kv_blocks_used = allocator_.num_used();
  load_.num_preemptions = num_preemptions_;
}

}  // namespace llmc::engine
