#include "tools/batch/batch_runner.h"

#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "absl/random/distributions.h"
#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gateway/openai/openai_error.h"
#include "gateway/openai/openai_response.h"
#include "nlohmann/json.hpp"
#include "worker/service/request_conversion.h"
#include "worker/service/typed_output_state.h"

namespace llmc::batch {
namespace {

using nlohmann::ordered_json;

constexpr absl::Duration kProgressInterval = absl::Milliseconds(250);

std::string OutputLine(int64_t index, const std::string& custom_id, ordered_json response, ordered_json error) {
  ordered_json line{{"id", absl::StrCat("batch_req_", index)},
                    {"custom_id", custom_id.empty() ? ordered_json(nullptr) : ordered_json(custom_id)},
                    {"response", std::move(response)},
                    {"error", std::move(error)}};
  return line.dump(-1, ' ', false, ordered_json::error_handler_t::replace);
}

std::string Answer(int64_t index, const std::string& custom_id, int status_code, const std::string& body) {
  return OutputLine(index, custom_id,
                    {{"status_code", status_code},
                     {"request_id", absl::StrCat("batch-", index)},
                     {"body", ordered_json::parse(body)}},
                    nullptr);
}

// One line's request: its engine requests (one per prompt, or per embedding input) and the answer they
// add up to. Sinks call it on the engine's delivery thread.
class BatchJob : public std::enable_shared_from_this<BatchJob> {
 public:
  BatchJob(BatchRunner& runner, int64_t index, std::string custom_id, BatchRequest request, std::string model)
      : runner_(runner),
        index_(index),
        custom_id_(std::move(custom_id)),
        request_(std::move(request)),
        model_(std::move(model)) {
    if (request_.generation.has_value()) {
      builder_.emplace(*request_.generation, gateway::NewResponseId(request_.generation->kind),
                       absl::ToUnixSeconds(absl::Now()), model_, absl::StrCat("llmc-", LLMC_VERSION));
    }
  }

  // The engine requests, or the error the worker would answer with.
  absl::StatusOr<std::vector<engine::GenerationRequest>> Convert(const worker::ServedModel& model,
                                                                 worker::ConstraintCompiler& constraints) {
    std::vector<engine::GenerationRequest> requests;
    if (request_.embedding.has_value()) {
      request_.embedding->embed.set_request_id(absl::StrCat("batch-", index_));
      return worker::ToEmbeddingRequests(request_.embedding->embed, model);
    }
    std::vector<v1::GenerateRequest*> generates = {&request_.generation->generate};
    for (v1::GenerateRequest& further : request_.generation->further_prompts) generates.push_back(&further);
    for (size_t i = 0; i < generates.size(); ++i) {
      generates[i]->set_request_id(absl::StrCat("batch-", index_, "-", i));
      std::optional<worker::TypedOutputPlan> typed;
      absl::StatusOr<engine::GenerationRequest> converted = worker::ToGenerationRequest(*generates[i], model, &typed);
      if (!converted.ok()) return converted.status();
      const v1::OutputConstraint* source =
          generates[i]->sampling().has_constraint() ? &generates[i]->sampling().constraint() : nullptr;
      // A chat line's answer is read as the worker reads it: content, reasoning and tool calls.
      typed_.push_back(nullptr);
      if (typed.has_value()) {
        typed_.back() = std::make_shared<worker::TypedOutputState>(*typed, absl::Uniform<uint64_t>(bits_));
        if (typed->constraint.has_value()) source = &*typed->constraint;
      }
      if (source != nullptr) {
        absl::StatusOr<engine::OutputConstraint> constraint = constraints.CompileNow(*source);
        if (!constraint.ok()) return constraint.status();
        converted->constraint = *std::move(constraint);
      }
      requests.push_back(*std::move(converted));
    }
    return requests;
  }

  // The typed-output state of generation part `part` (null for completions and embeddings).
  std::shared_ptr<worker::TypedOutputState> typed(size_t part) const {
    return part < typed_.size() ? typed_[part] : nullptr;
  }

  void Expect(size_t engine_requests) {
    absl::MutexLock lock(&mu_);
    remaining_ = engine_requests;
    embeddings_.resize(request_.embedding.has_value() ? engine_requests : 0);
  }

  bool failed() {
    absl::MutexLock lock(&mu_);
    return error_.has_value();
  }

  // A part that never reached the engine (refused, or skipped after an earlier part failed).
  void PartRefused(const absl::Status& status) {
    {
      absl::MutexLock lock(&mu_);
      if (!error_.has_value()) error_ = status;
    }
    PartDone();
  }

  void OnResponse(size_t part, v1::GenerateResponse& response) {
    int64_t tokens = 0;
    absl::MutexLock lock(&mu_);
    if (response.has_usage()) {
      prompt_tokens_ += response.usage().prompt_tokens();
      completion_tokens_ += response.usage().completion_tokens();
    }
    if (request_.embedding.has_value()) {
      embeddings_[part].mutable_values()->Swap(response.mutable_embedding());
      embeddings_[part].set_num_tokens(response.usage().prompt_tokens());
      return;
    }
    const uint32_t per_prompt = request_.generation->num_choices();
    for (v1::TokenDelta& delta : *response.mutable_deltas()) {
      tokens += delta.token_ids_size();
      delta.set_choice_index(static_cast<uint32_t>(part * per_prompt + delta.choice_index()));
    }
    if (!error_.has_value()) {
      if (absl::Status status = builder_->Accumulate(response, part); !status.ok()) error_ = status;
    }
    runner_.CountTokens(tokens);
  }

  void OnDone(const absl::Status& status) {
    {
      absl::MutexLock lock(&mu_);
      if (!status.ok() && !error_.has_value()) error_ = status;
    }
    PartDone();
  }

 private:
  void PartDone() {
    std::string line;
    bool failed = false;
    {
      absl::MutexLock lock(&mu_);
      if (--remaining_ > 0) return;
      failed = error_.has_value();
      if (failed) {
        absl::Status status = *error_;
        if (status.code() == absl::StatusCode::kNotFound) status = gateway::WithErrorCode(status, "model_not_found");
        line = Answer(index_, custom_id_, gateway::HttpStatusOf(status), gateway::ErrorEnvelope(status));
      } else if (request_.embedding.has_value()) {
        v1::EmbedResponse response;
        for (v1::Embedding& embedding : embeddings_) *response.add_embeddings() = std::move(embedding);
        response.mutable_usage()->set_prompt_tokens(static_cast<uint32_t>(prompt_tokens_));
        response.mutable_usage()->set_total_tokens(static_cast<uint32_t>(prompt_tokens_));
        line = Answer(index_, custom_id_, 200,
                      gateway::EmbeddingResponseJson(response, model_, request_.embedding->base64));
      } else {
        v1::Usage usage;
        usage.set_prompt_tokens(static_cast<uint32_t>(prompt_tokens_));
        usage.set_completion_tokens(static_cast<uint32_t>(completion_tokens_));
        usage.set_total_tokens(static_cast<uint32_t>(prompt_tokens_ + completion_tokens_));
        line = Answer(index_, custom_id_, 200, builder_->FinalJson(usage));
      }
    }
    runner_.JobDone(index_, std::move(line), failed, prompt_tokens_, completion_tokens_);
  }

  BatchRunner& runner_;
  const int64_t index_;
  const std::string custom_id_;
  BatchRequest request_;
  const std::string model_;
  absl::Mutex mu_;
  std::optional<gateway::OpenAiResponseBuilder> builder_ ABSL_GUARDED_BY(mu_);
  // Per generation part, set by Convert before any part runs; tool call ids are random per line.
  std::vector<std::shared_ptr<worker::TypedOutputState>> typed_;
  absl::BitGen bits_;
  std::vector<v1::Embedding> embeddings_ ABSL_GUARDED_BY(mu_);
  size_t remaining_ ABSL_GUARDED_BY(mu_) = 0;
  std::optional<absl::Status> error_ ABSL_GUARDED_BY(mu_);
  int64_t prompt_tokens_ = 0;  // written under mu_; read by PartDone after the last part
  int64_t completion_tokens_ = 0;
};

class JobSink final : public engine::GenerationSink {
 public:
  JobSink(std::shared_ptr<BatchJob> job, size_t part, BatchRunner& runner)
      : job_(std::move(job)), part_(part), runner_(runner), typed_(job_->typed(part)) {}
  void OnResponse(v1::GenerateResponse response) override {
    if (typed_ != nullptr) typed_->Apply(response);
    job_->OnResponse(part_, response);
  }
  void OnDone(absl::Status status) override {
    job_->OnDone(status);
    runner_.EngineRequestDone();
  }

 private:
  const std::shared_ptr<BatchJob> job_;
  const size_t part_;
  BatchRunner& runner_;
  const std::shared_ptr<worker::TypedOutputState> typed_;
};

// As the worker compiles them: tool-call grammars may generate the model's marker special tokens.
worker::ConstraintCompilerOptions BatchConstraintOptions(const worker::ServedModel& model) {
  worker::ConstraintCompilerOptions options;
  options.marker_tokens = worker::MarkerSpecialTokens(model, model.tool_call_format, model.reasoning);
  return options;
}

}  // namespace

BatchRunner::BatchRunner(engine::Engine& engine, const worker::ServedModel& model, int64_t window, std::ostream& out,
                         std::ostream* progress)
    : engine_(engine),
      model_(model),
      constraints_(*model.tokenizer, engine.manifest().eos_token_ids, BatchConstraintOptions(model)),
      window_(window),
      out_(out),
      progress_(progress),
      start_(absl::Now()) {}

BatchRunner::~BatchRunner() = default;

void BatchRunner::Add(BatchLine line) {
  int64_t index = 0;
  {
    absl::MutexLock lock(&mu_);
    index = next_index_++;
    pending_lines_.emplace_back();
    ++summary_.requests;
  }
  if (!line.line_error.ok()) {
    return JobDone(index,
                   OutputLine(index, line.custom_id, nullptr,
                              {{"code", "invalid_request"}, {"message", std::string(line.line_error.message())}}),
                   true, 0, 0);
  }
  if (!line.request_error.ok()) {
    return JobDone(index,
                   Answer(index, line.custom_id, gateway::HttpStatusOf(line.request_error),
                          gateway::ErrorEnvelope(line.request_error)),
                   true, 0, 0);
  }
  auto job = std::make_shared<BatchJob>(*this, index, line.custom_id, *std::move(line.request), model_.name());
  absl::StatusOr<std::vector<engine::GenerationRequest>> requests = job->Convert(model_, constraints_);
  if (!requests.ok()) {
    job->Expect(1);
    return job->PartRefused(requests.status());
  }
  job->Expect(requests->size());
  for (size_t part = 0; part < requests->size(); ++part) {
    if (job->failed()) {  // an earlier part was refused: the rest need not run
      job->PartRefused(absl::CancelledError("skipped"));
      continue;
    }
    {
      absl::MutexLock lock(&mu_);
      AwaitShowingProgress(absl::Condition(
          +[](BatchRunner* runner) { return runner->in_flight_ < runner->window_; }, this));
      ++in_flight_;
    }
    absl::StatusOr<uint64_t> id =
        engine_.Submit(std::move((*requests)[part]), std::make_shared<JobSink>(job, part, *this));
    if (!id.ok()) {
      EngineRequestDone();
      job->PartRefused(id.status());
    }
  }
}

void BatchRunner::EngineRequestDone() {
  absl::MutexLock lock(&mu_);
  --in_flight_;
}

void BatchRunner::JobDone(int64_t index, std::string output_line, bool failed, int64_t prompt_tokens,
                          int64_t completion_tokens) {
  absl::MutexLock lock(&mu_);
  pending_lines_[index - next_to_write_] = std::move(output_line);
  if (failed) ++summary_.failed;
  summary_.prompt_tokens += prompt_tokens;
  summary_.completion_tokens += completion_tokens;
  WriteReady();
}

void BatchRunner::WriteReady() {
  while (!pending_lines_.empty() && pending_lines_.front().has_value()) {
    out_ << *pending_lines_.front() << '\n';
    pending_lines_.pop_front();
    ++next_to_write_;
  }
  out_.flush();
}

void BatchRunner::AwaitShowingProgress(const absl::Condition& ready) {
  while (!mu_.AwaitWithTimeout(ready, kProgressInterval)) ShowProgress(false);
  ShowProgress(false);
}

void BatchRunner::ShowProgress(bool final) {
  if (progress_ == nullptr) return;
  const absl::Time now = absl::Now();
  if (!final && now - last_progress_ < kProgressInterval) return;
  last_progress_ = now;
  const double seconds = absl::ToDoubleSeconds(now - start_);
  const int64_t done = next_to_write_;
  const int64_t total = next_index_;
  constexpr int kWidth = 30;
  const int filled = total > 0 ? static_cast<int>(kWidth * done / total) : 0;
  *progress_ << absl::StrFormat("\rllmc-batch [%s%s] %d/%d requests, %d failed, %.0f generated tokens/s, %.1f s",
                                std::string(filled, '#'), std::string(kWidth - filled, '.'), done, total,
                                summary_.failed, seconds > 0 ? streamed_tokens_.load() / seconds : 0.0, seconds)
             << (final ? "\n" : "") << std::flush;
}

BatchSummary BatchRunner::Finish() {
  absl::MutexLock lock(&mu_);
  AwaitShowingProgress(absl::Condition(
      +[](BatchRunner* runner) { return runner->next_to_write_ == runner->next_index_ && runner->in_flight_ == 0; },
      this));
  ShowProgress(true);
  summary_.elapsed = absl::Now() - start_;
  return summary_;
}

}  // namespace llmc::batch
