#include "worker/engine/beam_search_action.h"

#include <algorithm>
#include <cmath>
#include <utility>

namespace llmc::engine {
namespace {

bool EndsWithEos(const Sequence& beam, const OutputProcessor& output) {
  return beam.num_output() > 0 && !beam.group.request.sampling.ignore_eos && output.IsEos(beam.tokens.back());
}

// The alternatives a logprobs entry lists: the first top_logprobs of the parent's proposals (best first).
std::vector<std::pair<int32_t, float>> Alternatives(const Sequence& parent, uint32_t top_logprobs) {
  const size_t count = std::min<size_t>(top_logprobs, parent.beam_candidates.size());
  return {parent.beam_candidates.begin(), parent.beam_candidates.begin() + static_cast<std::ptrdiff_t>(count)};
}

}  // namespace

double BeamSearchAction::Score(double cumulative_logprob, int64_t length, bool ends_with_eos, float length_penalty) {
  const int64_t scored_length = std::max<int64_t>(1, length - (ends_with_eos ? 1 : 0));
  return cumulative_logprob / std::pow(static_cast<double>(scored_length), static_cast<double>(length_penalty));
}

void BeamSearchAction::Run(StepData& step) {
  proposed_.clear();
  size_t kept = 0;
  for (size_t k = 0; k < step.sampling.size(); ++k) {
    Sequence& sequence = *step.sampling[k];
    if (!sequence.group.request.sampling.beam_search()) {
      if (kept != k) {
        step.sampling[kept] = step.sampling[k];
        step.sampled[kept] = std::move(step.sampled[k]);
      }
      ++kept;
      continue;
    }
    sequence.beam_candidates = std::move(step.sampled[k].beam_candidates);
    if (std::find(proposed_.begin(), proposed_.end(), &sequence.group) == proposed_.end()) {
      proposed_.push_back(&sequence.group);
    }
  }
  step.sampling.resize(kept);
  step.sampled.resize(kept);
  for (RequestGroup* group : proposed_) {
    const bool all_proposed = std::all_of(group->sequences.begin(), group->sequences.end(),
                                          [](const auto& beam) { return !beam->beam_candidates.empty(); });
    if (all_proposed) Select(*group);
  }
}

double BeamSearchAction::BestReachableScore(const Sequence& beam) const {
  const SamplingOptions& options = beam.group.request.sampling;
  const int64_t length = static_cast<int64_t>(beam.tokens.size());
  if (options.early_stopping == v1::BEAM_EARLY_STOPPING_NEVER && options.length_penalty > 0) {
    // Its cumulative logprob can only fall, and a longer beam divides it by more: the bound is at the
    // longest length the beam can still reach.
    const int64_t longest = std::min<int64_t>(beam.prompt_length + options.max_tokens, max_model_len_);
    return Score(beam.cumulative_logprob, std::max(length, longest), false, options.length_penalty);
  }
  return Score(beam.cumulative_logprob, length, EndsWithEos(beam, output_), options.length_penalty);
}

void BeamSearchAction::Select(RequestGroup& group) {
  const SamplingOptions& options = group.request.sampling;
  const size_t width = options.beam_width;
  BeamSearchState& state = *group.beam;
  // The first selection makes the request's first tokens (they go out only at the end).
  if (state.next_choice_index == 1 && observer_ != nullptr) observer_->OnFirstToken(absl::Now() - group.arrival_time);

  extensions_.clear();
  for (const auto& beam : group.sequences) {
    for (const auto& [token, logprob] : beam->beam_candidates) {
      extensions_.push_back({beam.get(), token, logprob, beam->cumulative_logprob + logprob});
    }
  }
  // Stable: equal cumulative logprobs keep the order of the beams, then of their proposals (best first).
  std::stable_sort(extensions_.begin(), extensions_.end(),
                   [](const Extension& a, const Extension& b) { return a.cumulative_logprob > b.cumulative_logprob; });
  if (extensions_.size() > 2 * width) extensions_.resize(2 * width);

  going_on_.clear();
  for (const Extension& extension : extensions_) {
    auto child = std::make_unique<Sequence>(*extension.parent, state.next_choice_index++);
    SampledToken sampled;
    sampled.token_id = extension.token;
    sampled.logprob = extension.logprob;
    sampled.top_logprobs = Alternatives(*extension.parent, options.top_logprobs);
    v1::TokenDelta delta = output_.Append(*child, sampled);
    child->cumulative_logprob = extension.cumulative_logprob;
    child->beam_text += delta.text();
    for (v1::TokenLogprob& entry : *delta.mutable_logprobs()) child->beam_logprobs.push_back(std::move(entry));
    if (delta.finish_reason() == v1::FINISH_REASON_UNSPECIFIED) {
      going_on_.emplace_back(extension.parent, std::move(child));
      continue;
    }
    const double score = Score(child->cumulative_logprob, static_cast<int64_t>(child->tokens.size()),
                               EndsWithEos(*child, output_), options.length_penalty);
    const auto output = child->output();
    state.finished.push_back({std::vector<int32_t>(output.begin(), output.end()), std::move(child->beam_text),
                              std::move(child->beam_logprobs), delta.finish_reason(), delta.stop_reason(), score});
  }
  std::stable_sort(state.finished.begin(), state.finished.end(),
                   [](const FinishedBeam& a, const FinishedBeam& b) { return a.score > b.score; });
  if (state.finished.size() > width) state.finished.resize(width);

  bool stop = going_on_.empty();
  if (!stop && state.finished.size() >= width) {
    stop = options.early_stopping == v1::BEAM_EARLY_STOPPING_WHEN_FULL ||
           state.finished[width - 1].score >= BestReachableScore(*going_on_.front().second);
  }
  if (stop) going_on_.clear();
  if (going_on_.size() > width) going_on_.resize(width);

  state.cached_prompt_tokens = group.sequences.front()->num_cached_prompt_tokens;
  // The new beams take their share of their parents' blocks before the parents let go of theirs.
  for (auto& [parent, child] : going_on_) scheduler_.Fork(*parent, child.get());
  for (const auto& beam : group.sequences) scheduler_.Remove(beam.get());
  group.sequences.clear();
  for (auto& [parent, child] : going_on_) group.sequences.push_back(std::move(child));
  going_on_.clear();
  if (group.sequences.empty()) Finish(group);
}

void BeamSearchAction::Finish(RequestGroup& group) {
  BeamSearchState& state = *group.beam;
  const size_t count = std::min<size_t>(group.request.sampling.n, state.finished.size());
  v1::GenerateResponse response;
  v1::FinishReason last_reason = v1::FINISH_REASON_STOP;
  state.completion_tokens = 0;
  for (size_t i = 0; i < count; ++i) {
    FinishedBeam& beam = state.finished[i];
    v1::TokenDelta* delta = response.add_deltas();
    delta->set_choice_index(static_cast<uint32_t>(i));
    delta->mutable_token_ids()->Assign(beam.output_tokens.begin(), beam.output_tokens.end());
    delta->set_text(std::move(beam.text));
    for (v1::TokenLogprob& entry : beam.logprobs) *delta->add_logprobs() = std::move(entry);
    delta->set_finish_reason(beam.finish_reason);
    delta->set_stop_reason(std::move(beam.stop_reason));
    state.completion_tokens += static_cast<int64_t>(beam.output_tokens.size());
    last_reason = beam.finish_reason;
  }
  table_.Respond(group, std::move(response), last_reason);
}

}  // namespace llmc::engine
