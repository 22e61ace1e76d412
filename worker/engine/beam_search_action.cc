#include "worker/engine/beam_search_action.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <utility>

namespace llmc::engine {
namespace {

struct {
  std::atomic<int64_t> selections{0};
  std::atomic<int64_t> history_nodes{0};
  std::atomic<int64_t> tokens_copied_whole{0};
  std::atomic<int64_t> tokens_rewritten{0};
  std::atomic<int64_t> max_tokens_rewritten{0};
  std::atomic<int64_t> block_hashes_copied{0};
} g_counts;  // BeamSearchAction::copy_counts()

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

double BeamSearchAction::BestReachableScore(double cumulative_logprob, int64_t length, bool ends_with_eos,
                                            const SamplingOptions& options, int64_t prompt_length) const {
  if (options.early_stopping == v1::BEAM_EARLY_STOPPING_NEVER && options.length_penalty > 0) {
    // Its cumulative logprob can only fall, and a longer beam divides it by more: the bound is at the
    // longest length the beam can still reach.
    const int64_t longest = std::min<int64_t>(prompt_length + options.max_tokens, max_model_len_);
    return Score(cumulative_logprob, std::max(length, longest), false, options.length_penalty);
  }
  return Score(cumulative_logprob, length, ends_with_eos, options.length_penalty);
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
    Sequence& parent = *extension.parent;
    auto child = std::make_unique<Sequence>(parent, state.next_choice_index++);
    SampledToken sampled;
    sampled.token_id = extension.token;
    sampled.logprob = extension.logprob;
    sampled.top_logprobs = Alternatives(parent, options.top_logprobs);
    // The parent's tokens, lent to the new beam while its token is appended and checked, and taken back.
    child->tokens.swap(parent.tokens);
    v1::TokenDelta delta = output_.Append(*child, sampled);
    const int64_t length = static_cast<int64_t>(child->tokens.size());
    const bool ends_with_eos = EndsWithEos(*child, output_);
    child->tokens.pop_back();
    child->tokens.swap(parent.tokens);
    child->cumulative_logprob = extension.cumulative_logprob;
    std::vector<v1::TokenLogprob> logprobs;
    for (v1::TokenLogprob& entry : *delta.mutable_logprobs()) logprobs.push_back(std::move(entry));
    child->beam_history =
        parent.beam_history.Extend(extension.token, std::move(*delta.mutable_text()), std::move(logprobs));
    if (delta.finish_reason() == v1::FINISH_REASON_UNSPECIFIED) {
      going_on_.emplace_back(&parent, std::move(child));
      continue;
    }
    const double score = Score(child->cumulative_logprob, length, ends_with_eos, options.length_penalty);
    state.finished.push_back(
        {std::move(child->beam_history), delta.finish_reason(), std::move(*delta.mutable_stop_reason()), score});
  }
  g_counts.history_nodes += static_cast<int64_t>(extensions_.size());
  ++g_counts.selections;
  std::stable_sort(state.finished.begin(), state.finished.end(),
                   [](const FinishedBeam& a, const FinishedBeam& b) { return a.score > b.score; });
  if (state.finished.size() > width) state.finished.resize(width);
  if (going_on_.size() > width) going_on_.resize(width);

  bool stop = going_on_.empty();
  if (!stop && state.finished.size() >= width) {
    // The best new beam: its parent's tokens and its own.
    const auto& [parent, best] = going_on_.front();
    const bool ends_with_eos = !options.ignore_eos && output_.IsEos(best->beam_history.last_token());
    stop = options.early_stopping == v1::BEAM_EARLY_STOPPING_WHEN_FULL ||
           state.finished[width - 1].score >= BestReachableScore(best->cumulative_logprob,
                                                                 static_cast<int64_t>(parent->tokens.size()) + 1,
                                                                 ends_with_eos, options, best->prompt_length);
  }
  if (stop) going_on_.clear();

  state.cached_prompt_tokens = group.sequences.front()->num_cached_prompt_tokens;
  PassOnTokens(group);
  // The new beams take their share of their parents' blocks before the parents let go of theirs.
  for (auto& [parent, child] : going_on_) scheduler_.Fork(*parent, child.get());
  for (const auto& beam : group.sequences) scheduler_.Remove(beam.get());
  group.sequences.clear();
  for (auto& [parent, child] : going_on_) group.sequences.push_back(std::move(child));
  going_on_.clear();
  if (group.sequences.empty()) Finish(group);
}

void BeamSearchAction::PassOnTokens(RequestGroup& group) {
  std::vector<BeamSearchState::SpareTokens>& spare = group.beam->spare_tokens;
  // The vectors of the beams that no new beam extends become spare.
  for (const auto& beam : group.sequences) {
    const bool has_child =
        std::any_of(going_on_.begin(), going_on_.end(), [&](const auto& entry) { return entry.first == beam.get(); });
    if (!has_child) spare.push_back({std::move(beam->tokens), beam->beam_history});
  }
  int64_t rewritten = 0;
  // A parent's second and later new beams first, while every parent still has its tokens.
  for (size_t i = 0; i < going_on_.size(); ++i) {
    Sequence* const parent = going_on_[i].first;  // not a structured binding: clang 14 cannot capture one
    std::unique_ptr<Sequence>& child = going_on_[i].second;
    const bool first = std::none_of(going_on_.begin(), going_on_.begin() + static_cast<std::ptrdiff_t>(i),
                                    [&](const auto& entry) { return entry.first == parent; });
    if (first) continue;
    const int64_t length = static_cast<int64_t>(parent->tokens.size());
    int64_t common = 0;  // leading tokens the new beam's vector already holds
    const bool rewrites = !spare.empty();
    if (rewrites) {
      // Every output starts after the same prompt.
      common = parent->prompt_length + BeamHistory::CommonLength(parent->beam_history, spare.back().output);
      child->tokens = std::move(spare.back().tokens);
      child->tokens.resize(static_cast<size_t>(common));
      spare.pop_back();
    } else {
      // More beams than before: the first selection's, or after extensions finished.
      child->tokens.reserve(static_cast<size_t>(parent->prompt_length + group.request.sampling.max_tokens));
    }
    child->tokens.insert(child->tokens.end(), parent->tokens.begin() + static_cast<std::ptrdiff_t>(common),
                         parent->tokens.end());
    child->tokens.push_back(child->beam_history.last_token());
    if (rewrites) {
      rewritten += length - common;
    } else {
      g_counts.tokens_copied_whole += length - common;
    }
    // Block hashes (one per full block) are copied, like the block table Scheduler::Fork copies.
    child->block_hashes = parent->block_hashes;
    g_counts.block_hashes_copied += static_cast<int64_t>(child->block_hashes.size());
  }
  // Each parent's first new beam takes its vector.
  for (auto& [parent, child] : going_on_) {
    if (!child->tokens.empty()) continue;
    child->tokens = std::move(parent->tokens);
    child->tokens.push_back(child->beam_history.last_token());
    child->block_hashes = std::move(parent->block_hashes);
  }
  // Enough to rewrite for as many beams as can go on; none once the search is over.
  const size_t keep = going_on_.empty() ? 0 : group.request.sampling.beam_width;
  if (spare.size() > keep) spare.erase(spare.begin(), spare.end() - static_cast<std::ptrdiff_t>(keep));
  g_counts.tokens_rewritten += rewritten;
  for (int64_t max = g_counts.max_tokens_rewritten.load();
       rewritten > max && !g_counts.max_tokens_rewritten.compare_exchange_weak(max, rewritten);) {
  }
}

void BeamSearchAction::Finish(RequestGroup& group) {
  BeamSearchState& state = *group.beam;
  const size_t count = std::min<size_t>(group.request.sampling.n, state.finished.size());
  v1::GenerateResponse response;
  v1::FinishReason last_reason = v1::FINISH_REASON_STOP;
  state.completion_tokens = 0;
  for (size_t i = 0; i < count; ++i) {
    FinishedBeam& beam = state.finished[i];
    BeamHistory::Output output = beam.output.Lay();
    v1::TokenDelta* delta = response.add_deltas();
    delta->set_choice_index(static_cast<uint32_t>(i));
    delta->mutable_token_ids()->Assign(output.tokens.begin(), output.tokens.end());
    delta->set_text(std::move(output.text));
    for (v1::TokenLogprob& entry : output.logprobs) *delta->add_logprobs() = std::move(entry);
    delta->set_finish_reason(beam.finish_reason);
    delta->set_stop_reason(std::move(beam.stop_reason));
    state.completion_tokens += static_cast<int64_t>(output.tokens.size());
    last_reason = beam.finish_reason;
  }
  table_.Respond(group, std::move(response), last_reason);
}

BeamSearchAction::CopyCounts BeamSearchAction::copy_counts() {
  CopyCounts counts;
  counts.selections = g_counts.selections.load();
  counts.history_nodes = g_counts.history_nodes.load();
  counts.tokens_copied_whole = g_counts.tokens_copied_whole.load();
  counts.tokens_rewritten = g_counts.tokens_rewritten.load();
  counts.max_tokens_rewritten = g_counts.max_tokens_rewritten.load();
  counts.block_hashes_copied = g_counts.block_hashes_copied.load();
  return counts;
}

void BeamSearchAction::ResetCopyCounts() {
  for (auto* counter : {&g_counts.selections, &g_counts.history_nodes, &g_counts.tokens_copied_whole,
                        &g_counts.tokens_rewritten, &g_counts.max_tokens_rewritten, &g_counts.block_hashes_copied}) {
    counter->store(0);
  }
}

}  // namespace llmc::engine
