#ifndef LLMC_WORKER_ENGINE_BEAM_SEARCH_ACTION_H_
#define LLMC_WORKER_ENGINE_BEAM_SEARCH_ACTION_H_

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "worker/engine/engine_observer.h"
#include "worker/engine/output_processor.h"
#include "worker/engine/request_table.h"
#include "worker/engine/scheduler.h"
#include "worker/engine/step_data.h"

namespace llmc::engine {

// Beam search (vLLM's use_beam_search), between sampling and emission. The sampling row of each beam
// proposes its 2 * beam_width likeliest next tokens (sampler.h: log-probabilities after penalties and
// suppressed tokens). Once every live beam of a request has proposed (beams advance in lockstep; one that
// was preempted holds the others back until it is recomputed), the request's 2 * beam_width best
// extensions by cumulative logprob are formed and each is checked against the stop conditions
// (output_processor.h). Those that stop join the request's best finished beams (at most beam_width, by
// score); the best beam_width of the others become the new beams, forked from their parents onto shared KV
// blocks (Scheduler::Fork; the partial last block is copied on write). The search ends when no extension
// goes on, or when early stopping finds that none can beat the worst kept finished beam; then the `n` best
// finished beams go out in one response, best first. Beam rows leave the step's sampling rows, so the
// emit action sees only other requests. Engine thread only.
//
// No selection copies a beam's history. Its output (tokens, text, logprob entries) is a BeamHistory shared
// with its ancestors: one node per extension. Its token vector (prompt then output, which the model inputs,
// penalties and prefix hashing read as one array) is lent to each extension while it is checked and then
// passed on: a parent's first new beam takes it; a parent's later new beams take the vectors of beams that
// left no new beam (BeamSearchState::spare_tokens), rewritten only after the position where the two beams'
// outputs part, so the prompt is not copied again. Only when there are more beams than before (the first
// selection's, from the one beam that read the prompt, or after extensions finished) is a vector copied
// whole. Block hashes, 8 bytes per full block, are copied like the block table Scheduler::Fork copies.
class BeamSearchAction {
 public:
  BeamSearchAction(const OutputProcessor& output, RequestTable& table, Scheduler& scheduler, int64_t max_model_len,
                   EngineObserver* observer)
      : output_(output), table_(table), scheduler_(scheduler), max_model_len_(max_model_len), observer_(observer) {}

  void Run(StepData& step);

  // A beam's score: cumulative logprob / length ** length_penalty, the length counting the prompt and the
  // output without a final EOS (`ends_with_eos`).
  static double Score(double cumulative_logprob, int64_t length, bool ends_with_eos, float length_penalty);

  // Instrumentation for tests: what the selections of every engine in the process have made and copied.
  struct CopyCounts {
    int64_t selections = 0;
    int64_t history_nodes = 0;         // made, one per extension formed
    int64_t tokens_copied_whole = 0;   // token ids copied into new vectors (more beams than before)
    int64_t tokens_rewritten = 0;      // token ids rewritten into spare vectors
    int64_t max_tokens_rewritten = 0;  // the most in one selection
    int64_t block_hashes_copied = 0;
  };
  static CopyCounts copy_counts();
  static void ResetCopyCounts();

 private:
  // Every live beam of `group` has proposed: the next beams, or the end of the search.
  void Select(RequestGroup& group);
  // The highest score a beam going on (its cumulative logprob, length and last token) could still reach,
  // under the request's early stopping rule.
  double BestReachableScore(double cumulative_logprob, int64_t length, bool ends_with_eos,
                            const SamplingOptions& options, int64_t prompt_length) const;
  // The search is over: the n best finished beams, and the request's end.
  void Finish(RequestGroup& group);
  // Gives each new beam in going_on_ its token vector and block hashes (see above).
  void PassOnTokens(RequestGroup& group);

  struct Extension {
    Sequence* parent;
    int32_t token;
    float logprob;
    double cumulative_logprob;
  };

  const OutputProcessor& output_;
  RequestTable& table_;
  Scheduler& scheduler_;
  const int64_t max_model_len_;
  EngineObserver* const observer_;
  std::vector<RequestGroup*> proposed_;  // this step's requests whose beams proposed
  std::vector<Extension> extensions_;
  std::vector<std::pair<Sequence*, std::unique_ptr<Sequence>>> going_on_;  // (parent, new beam)
};

}  // namespace llmc::engine

#endif  // LLMC_WORKER_ENGINE_BEAM_SEARCH_ACTION_H_
