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
class BeamSearchAction {
 public:
  BeamSearchAction(const OutputProcessor& output, RequestTable& table, Scheduler& scheduler, int64_t max_model_len,
                   EngineObserver* observer)
      : output_(output), table_(table), scheduler_(scheduler), max_model_len_(max_model_len), observer_(observer) {}

  void Run(StepData& step);

  // A beam's score: cumulative logprob / length ** length_penalty, the length counting the prompt and the
  // output without a final EOS (`ends_with_eos`).
  static double Score(double cumulative_logprob, int64_t length, bool ends_with_eos, float length_penalty);

 private:
  // Every live beam of `group` has proposed: the next beams, or the end of the search.
  void Select(RequestGroup& group);
  // The highest score `beam` (going on) could still reach, under the request's early stopping rule.
  double BestReachableScore(const Sequence& beam) const;
  // The search is over: the n best finished beams, and the request's end.
  void Finish(RequestGroup& group);

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
