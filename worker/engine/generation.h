#ifndef LLMC_WORKER_ENGINE_GENERATION_H_
#define LLMC_WORKER_ENGINE_GENERATION_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "llmc/v1/worker.pb.h"
#include "worker/engine/sampling_options.h"
#include "worker/grammar/automaton.h"
#include "worker/grammar/vocabulary.h"

namespace llmc::engine {

// What an embedding request makes of its prompt's final normalized hidden states (then L2-normalized).
enum class Pooling { kNone, kLast, kMean };

// A compiled structured-output constraint (docs/structured-outputs.md): every choice's tokens must spell a
// sentence of `grammar`, over the model's vocabulary as `vocabulary` indexes it. Both null: unconstrained.
struct OutputConstraint {
  std::shared_ptr<const grammar::CompiledGrammar> grammar;
  std::shared_ptr<const grammar::VocabularyIndex> vocabulary;

  explicit operator bool() const { return grammar != nullptr && vocabulary != nullptr; }
};

// One generation request as the engine takes it: already tokenized, sampling options resolved.
struct GenerationRequest {
  std::string request_id;  // for logs
  std::vector<int32_t> prompt_token_ids;
  SamplingOptions sampling;
  OutputConstraint constraint;
  // Not kNone: an embedding request. The engine prefills the prompt in its batches and answers with one
  // response carrying the embedding and usage; sampling options other than n = 1 are not read.
  Pooling pooling = Pooling::kNone;
  absl::Time deadline = absl::InfiniteFuture();  // past it: DEADLINE_EXCEEDED
  // Prefix caching: only requests with the same salt share cached blocks (vLLM's cache_salt; the gateway
  // may add one per API key). Empty: the unsalted cache.
  std::string cache_salt;
};

// Where the engine delivers a request's output. Called on the engine thread: implementations must only
// queue and return (the network is a separate delivery path).
class GenerationSink {
 public:
  virtual ~GenerationSink() = default;
  // The tokens one step produced for this request: at most one delta per choice. The last response of a
  // successful request carries usage, and every choice's last delta its finish_reason.
  virtual void OnResponse(v1::GenerateResponse response) = 0;
  // Called exactly once, after the last OnResponse: OK when every choice finished; otherwise why the
  // request ended early (CANCELLED after Abort, DEADLINE_EXCEEDED, UNAVAILABLE when the engine stopped,
  // INTERNAL when the model failed).
  virtual void OnDone(absl::Status status) = 0;
};

}  // namespace llmc::engine

#endif  // LLMC_WORKER_ENGINE_GENERATION_H_
