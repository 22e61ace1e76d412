#include "worker/engine/continuous_batching_engine.h"

#include <c10/core/InferenceMode.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "worker/engine/device_memory.h"
#include "worker/engine/request_checks.h"

namespace llmc::engine {
namespace {

// A step's tokens-per-second figure covers at least this much wall time, and goes stale after twice it.
constexpr absl::Duration kRateWindow = absl::Seconds(1);
// How long an idle engine sleeps before looking at its inbox again (arrivals wake it at once).
constexpr absl::Duration kIdleWait = absl::Milliseconds(200);

SchedulerLimits Limits(const EngineOptions& options) {
  return {options.block_size, options.max_num_batched_tokens, options.max_running, options.enable_prefix_caching};
}

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
      resolved.max_num_batched_tokens < resolved.max_running || resolved.max_consecutive_failed_steps <= 0) {
    return absl::InvalidArgumentError(
        "engine limits (block_size, max_running, max_waiting, max_consecutive_failed_steps) must be positive, with "
        "max_num_batched_tokens >= max_running");
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
      options_(options),
      observer_(observer),
      kv_cache_(std::move(kv_cache)),
      inbox_(options.max_waiting),
      allocator_(num_blocks),
      scheduler_(allocator_, Limits(options)),
      output_(tokenizer, model_->manifest(), options.max_model_len),
      table_(tokenizer, scheduler_, inbox_, observer),
      admit_(inbox_, table_),
      schedule_(scheduler_, table_, observer),
      forward_(*model_, kv_cache_, output_, scheduler_, Limits(options), options.max_running, observer),
      prompt_logprobs_(output_),
      pool_(table_),
      beam_search_(output_, table_, scheduler_, options_.max_model_len, observer),
      emit_(output_, table_, observer) {
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
  model::ForwardBatch warm_up{view(ids, at::kLong),         view(positions, at::kLong),
                              view(slots, at::kLong),       view(table, at::kInt).view({1, 1}),
                              view(lengths, at::kInt),      view(starts, at::kInt),
                              view(logits_rows, at::kLong), at::Tensor()};
  {
    c10::InferenceMode inference;
    const absl::Time start = absl::Now();
    RETURN_IF_ERROR(
        Annotate(model_->ForwardForSampling(warm_up, kv_cache_, at::empty({0}, at::kLong), /*top_k=*/1).status(),
                 "warm-up step"));
    LLMC_LOG(Info) << "warm-up step took " << absl::FormatDuration(absl::Now() - start);
  }
  RETURN_IF_ERROR(inbox_.Open());
  thread_ = std::thread([this] { Run(); });
  return absl::OkStatus();
}

absl::Status ContinuousBatchingEngine::Validate(const GenerationRequest& request) const {
  const SamplingOptions& sampling = request.sampling;
  const int64_t prompt_length = static_cast<int64_t>(request.prompt_token_ids.size());
  if (prompt_length == 0) return absl::InvalidArgumentError("the prompt is empty");
  const int64_t vocab_size = model_->manifest().vocab_size;
  const std::string& model_name = model_->manifest().name;
  RETURN_IF_ERROR(CheckIdsInVocabulary(request.prompt_token_ids, "prompt token ids", vocab_size, model_name));
  RETURN_IF_ERROR(CheckIdsInVocabulary(sampling.stop_token_ids, "stop_token_ids", vocab_size, model_name));
  if (sampling.constrained != static_cast<bool>(request.constraint)) {
    // The worker service compiles a request's constraint before submitting it; running without it would
    // silently ignore the client's schema.
    return absl::InvalidArgumentError("a structured-output request reached the engine without its compiled grammar");
  }
  if (request.constraint && sampling.beam_search()) {
    return absl::InvalidArgumentError("structured outputs are not available with beam search");
  }
  for (const auto& [id, bias] : sampling.logit_bias) {
    RETURN_IF_ERROR(CheckIdsInVocabulary({id}, "logit_bias", vocab_size, model_name));
  }
  if (request.pooling != Pooling::kNone) {
    if (!model_->serves_embeddings()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "model ", model_->manifest().name,
          " serves no embeddings (its package was exported with --embedding-pooling none, or before format "
          "version 6; re-export it with tools/export_model.py)"));
    }
    if (sampling.n != 1) return absl::InvalidArgumentError("an embedding request has one choice");
    return CheckInputFitsContext(prompt_length, "the input", options_.max_model_len);
  }
  if (sampling.n < 1) return absl::InvalidArgumentError("n must be at least 1");
  if (sampling.beam_search()) {
    if (sampling.beam_width < 2 || sampling.n > sampling.beam_width) {
      return absl::InvalidArgumentError(absl::StrCat("beam search needs at least 2 beams and n (", sampling.n,
                                                     ") at most the beam width (", sampling.beam_width, ")"));
    }
    if (!sampling.greedy() || sampling.prompt_logprobs.has_value()) {
      return absl::InvalidArgumentError("beam search takes temperature 0 and no prompt_logprobs");
    }
    if (sampling.beam_width > options_.max_running) {
      return absl::InvalidArgumentError(absl::StrCat("a beam width of ", sampling.beam_width,
                                                     " is more than this worker runs at once (max_running ",
                                                     options_.max_running, ")"));
    }
  }
  if (sampling.max_tokens < 1) return absl::InvalidArgumentError("max_tokens must be at least 1");
  return CheckFitsContext(prompt_length, sampling.max_tokens, "max_tokens", options_.max_model_len, model_name);
}

absl::StatusOr<uint64_t> ContinuousBatchingEngine::Submit(GenerationRequest request,
                                                          std::shared_ptr<GenerationSink> sink) {
  RETURN_IF_ERROR(Validate(request));
  if (absl::Status health = Health(); !health.ok()) {
    return absl::UnavailableError(
        absl::StrCat("this worker is unhealthy (", health.message(), "); try another worker"));
  }
  auto group = std::make_unique<RequestGroup>();
  group->request = std::move(request);
  group->sink = std::move(sink);
  group->arrival_time = absl::Now();
  return inbox_.Push(std::move(group));
}

absl::Status ContinuousBatchingEngine::Health() const {
  absl::MutexLock lock(&state_mu_);
  return health_;
}

void ContinuousBatchingEngine::SetUnhealthyListener(std::function<void(const absl::Status&)> listener) {
  unhealthy_listener_ = std::move(listener);
}

EngineLoad ContinuousBatchingEngine::Load() const {
  EngineLoad load;
  {
    absl::MutexLock lock(&state_mu_);
    load = load_;
    // An idle engine publishes nothing, so an old rate means no recent tokens.
    if (absl::Now() - load_rate_time_ > 2 * kRateWindow) load.tokens_per_second = 0;
  }
  load.num_waiting += inbox_.num_untaken();
  return load;
}

void ContinuousBatchingEngine::Stop() {
  inbox_.Stop();
  if (thread_.joinable()) thread_.join();
  // Requests submitted but never taken by the engine thread (or the thread never started).
  std::vector<Delivery> refusals;
  for (auto& group : inbox_.TakeLeftovers()) {
    refusals.push_back(
        {std::move(group->sink), std::nullopt, absl::UnavailableError("the engine stopped before the request ran")});
  }
  delivery_.Push(std::move(refusals));
  delivery_.Flush();
}

void ContinuousBatchingEngine::Run() {
  c10::InferenceMode inference;
  // Logits rows: one per running sequence, plus a step's prompt logprob rows.
  model_->ReserveStepBuffers(options_.max_num_batched_tokens, options_.max_running + kMaxPromptLogprobRowsPerStep,
                             kMaxTopLogitsForSampling);
  while (admit_.Run(kIdleWait)) {
    // Cancellations and expiries are told before the step, not after it.
    Deliver();
    try {
      Step();
    } catch (const std::exception& error) {  // a last resort: the actions turn their own failures into a status
      FailStep(absl::InternalError(absl::StrCat("the engine step threw: ", error.what())), /*model_failed=*/true);
    }
    Deliver();
  }
  table_.EndAll(absl::UnavailableError("the engine stopped"));
  Deliver();
}

void ContinuousBatchingEngine::Step() {
  step_.Reset();
  step_.start = absl::Now();
  schedule_.Run(step_);
  if (step_.plan.empty()) {
    PublishLoad(0);
    if (!table_.empty()) absl::SleepFor(absl::Milliseconds(1));  // nothing fits yet; never spin hot
    return;
  }
  if (absl::Status status = forward_.Run(step_); !status.ok()) return FailStep(status, /*model_failed=*/true);
  // The sampler fails only on inputs validation should have refused: the step's requests end, but it says
  // nothing about the model, so it does not count towards the worker's health.
  if (absl::Status status = sample_.Run(step_); !status.ok()) return FailStep(status, /*model_failed=*/false);
  consecutive_failed_steps_ = 0;
  prompt_logprobs_.Run(step_);
  pool_.Run(step_);
  const int64_t sampled_rows = static_cast<int64_t>(step_.sampled.size());  // beams' rows included
  beam_search_.Run(step_);
  emit_.Run(step_);
  const absl::Duration step_time = absl::Now() - step_.start;
  if (step_.plan.num_prefill_tokens > 0) {
    prefill_rate_.Add(static_cast<double>(step_.plan.num_prefill_tokens), absl::ToDoubleSeconds(step_time));
  }
  if (observer_ != nullptr) {
    observer_->OnStep({step_.plan.num_prefill_tokens, step_.plan.num_decode_tokens, step_time, step_.model_time});
  }
  PublishLoad(sampled_rows);
}

void ContinuousBatchingEngine::FailStep(const absl::Status& status, bool model_failed) {
  if (model_failed) ++consecutive_failed_steps_;
  table_.LogError(absl::StrCat("engine step failed",
                               model_failed ? absl::StrCat(" (", consecutive_failed_steps_, " in a row)") : "", ": ",
                               status.message()));
  for (const uint64_t id : step_.group_ids) {
    if (RequestGroup* group = table_.Find(id); group != nullptr) {
      table_.EndEarly(*group, status, v1::FINISH_REASON_ERROR);
    }
  }
  if (model_failed && consecutive_failed_steps_ >= options_.max_consecutive_failed_steps && Health().ok()) {
    const absl::Status unhealthy = absl::InternalError(
        absl::StrCat(consecutive_failed_steps_, " model steps in a row failed, the last with: ", status.message()));
    {
      absl::MutexLock lock(&state_mu_);
      health_ = unhealthy;
    }
    table_.LogError(absl::StrCat("the engine is unhealthy and refuses new requests: ", unhealthy.message()));
    if (unhealthy_listener_) table_.Notify([listener = unhealthy_listener_, unhealthy] { listener(unhealthy); });
  }
  PublishLoad(0);
}

void ContinuousBatchingEngine::PublishLoad(int64_t generated_tokens) {
  const absl::Time now = absl::Now();
  if (window_start_ == absl::InfinitePast()) window_start_ = now;
  window_tokens_ += generated_tokens;
  absl::MutexLock lock(&state_mu_);
  if (now - window_start_ >= kRateWindow) {
    load_.tokens_per_second = static_cast<double>(window_tokens_) / absl::ToDoubleSeconds(now - window_start_);
    load_rate_time_ = now;
    window_tokens_ = 0;
    window_start_ = now;
  }
  load_.num_waiting = scheduler_.num_waiting();
  load_.num_running = scheduler_.num_running();
  load_.pending_prefill_tokens = scheduler_.pending_prefill_tokens();
  load_.prefill_tokens_per_second = prefill_rate_.rate();
  load_.num_kv_blocks_used = allocator_.num_used();
  load_.num_preemptions = schedule_.num_preemptions();
  load_.prefix_cache_queries = schedule_.prefix_cache_queries();
  load_.prefix_cache_hits = schedule_.prefix_cache_hits();
}

}  // namespace llmc::engine
