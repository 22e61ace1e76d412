#ifndef LLMC_WORKER_ENGINE_SEQUENCE_H_
#define LLMC_WORKER_ENGINE_SEQUENCE_H_

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "absl/types/span.h"
#include "worker/engine/generation.h"
#include "worker/tokenizer/incremental_detokenizer.h"
#include "worker/tokenizer/stop_string_matcher.h"

namespace llmc::engine {

// A sequence's life: queued → prefill → decode → one of the three ends. A preempted sequence goes back to
// queued and recomputes its KV (prompt and output so far) when admitted again.
enum class SequenceState { kQueued, kPrefill, kDecode, kFinished, kCancelled, kFailed };

const char* SequenceStateName(SequenceState state);

struct RequestGroup;

// One choice of a request: its tokens, its KV blocks and its streaming state. Owned by its RequestGroup;
// touched only by the engine thread.
struct Sequence {
  Sequence(RequestGroup& group, uint32_t choice_index, const tokenizer::Tokenizer& tokenizer);

  RequestGroup& group;
  const uint32_t choice_index;
  SequenceState state = SequenceState::kQueued;
  std::vector<int32_t> tokens;  // prompt then output
  int64_t prompt_length = 0;
  int64_t num_computed = 0;  // leading tokens whose K/V are in the cache
  std::vector<int32_t> block_table;
  uint64_t admission_order = 0;  // larger is newer; the newest is preempted first
  std::mt19937_64 rng;
  tokenizer::IncrementalDetokenizer detokenizer;
  tokenizer::StopStringMatcher stop_matcher;
  uint32_t num_delivered = 0;  // output tokens already sent
  absl::Time last_token_time = absl::InfinitePast();

  int64_t num_output() const { return static_cast<int64_t>(tokens.size()) - prompt_length; }
  int64_t num_uncomputed() const { return static_cast<int64_t>(tokens.size()) - num_computed; }
  absl::Span<const int32_t> prompt() const { return absl::MakeConstSpan(tokens).first(prompt_length); }
  absl::Span<const int32_t> output() const { return absl::MakeConstSpan(tokens).subspan(prompt_length); }
  bool finished() const {
    return state == SequenceState::kFinished || state == SequenceState::kCancelled || state == SequenceState::kFailed;
  }
};

// One submitted request: its `n` choices and where their output goes.
struct RequestGroup {
  uint64_t id = 0;
  GenerationRequest request;
  std::shared_ptr<GenerationSink> sink;
  std::vector<std::unique_ptr<Sequence>> sequences;
  absl::Time arrival_time;
  bool counted_as_waiting = true;  // against max_waiting until a first choice runs
  bool first_token_sent = false;
  int num_unfinished = 0;
  int64_t completion_tokens = 0;
  v1::FinishReason finish_reason = v1::FINISH_REASON_UNSPECIFIED;  // of the choice that finished last
  // The deltas of the step being processed, sent as one response at the end of the step.
  v1::GenerateResponse pending_response;
};

}  // namespace llmc::engine

#endif  // LLMC_WORKER_ENGINE_SEQUENCE_H_
