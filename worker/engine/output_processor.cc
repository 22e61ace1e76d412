#include "worker/engine/output_processor.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "worker/engine/constraint_state.h"

namespace llmc::engine {
namespace {

bool Contains(const std::vector<int32_t>& ids, int32_t id) {
  return std::find(ids.begin(), ids.end(), id) != ids.end();
}

}  // namespace

OutputProcessor::OutputProcessor(const tokenizer::Tokenizer& tokenizer, const model::ModelManifest& manifest,
                                 int64_t max_model_len)
    : tokenizer_(tokenizer),
      eos_token_ids_(manifest.eos_token_ids.begin(), manifest.eos_token_ids.end()),
      max_model_len_(max_model_len) {}

void OutputProcessor::SuppressedTokens(const Sequence& sequence, std::vector<int32_t>& out) const {
  out.clear();
  const SamplingOptions& options = sequence.group.request.sampling;
  BannedWordEnds(sequence, out);
  if (sequence.num_output() >= options.min_tokens) return;
  // A grammar that may end here wins over min_tokens: its mask may allow nothing but the end.
  const ConstraintState* constraint = sequence.group.constraint.get();
  const bool grammar_may_end = constraint != nullptr && constraint->matcher(sequence.choice_index).CanEnd();
  if (!options.ignore_eos && !grammar_may_end) out.insert(out.end(), eos_token_ids_.begin(), eos_token_ids_.end());
  out.insert(out.end(), options.stop_token_ids.begin(), options.stop_token_ids.end());
}

bool OutputProcessor::Allowed(const Sequence& sequence, int32_t token) const {
  const std::vector<uint64_t>& mask = sequence.group.request.sampling.allowed_token_mask;
  if (!mask.empty() && (token < 0 || static_cast<size_t>(token >> 6) >= mask.size() ||
                        ((mask[static_cast<size_t>(token) >> 6] >> (token & 63)) & 1) == 0)) {
    return false;
  }
  if (sequence.group.request.sampling.bad_words.empty()) return true;
  std::vector<int32_t> banned;
  BannedWordEnds(sequence, banned);
  return std::find(banned.begin(), banned.end(), token) == banned.end();
}

void OutputProcessor::BannedWordEnds(const Sequence& sequence, std::vector<int32_t>& out) const {
  const absl::Span<const int32_t> output = sequence.output();
  for (const std::vector<int32_t>& word : sequence.group.request.sampling.bad_words) {
    const size_t before = word.size() - 1;
    if (before > output.size()) continue;
    if (std::equal(word.begin(), word.end() - 1, output.end() - before)) out.push_back(word.back());
  }
}

std::string OutputProcessor::Flush(Sequence& sequence) const {
  const tokenizer::StopStringMatcher::Result tail = sequence.stop_matcher.Add(sequence.detokenizer.Finish());
  return tail.stopped ? tail.text : tail.text + sequence.stop_matcher.Finish();
}

void OutputProcessor::FillLogprob(const SampledToken& sampled, const SamplingOptions& options,
                                  v1::TokenLogprob& out) const {
  DescribeToken(sampled.token_id, out);
  out.set_logprob(sampled.logprob);
  for (const auto& [id, logprob] : sampled.top_logprobs) {
    v1::TopLogprob* top = out.add_top();
    DescribeToken(id, *top);
    top->set_logprob(logprob);
  }
}

v1::TokenDelta OutputProcessor::Append(Sequence& sequence, const SampledToken& sampled) const {
  const SamplingOptions& options = sequence.group.request.sampling;
  const int32_t token = sampled.token_id;
  const bool disallowed = !Allowed(sequence, token);
  sequence.tokens.push_back(token);
  v1::TokenDelta delta;
  delta.set_choice_index(sequence.choice_index);
  delta.set_index(static_cast<uint32_t>(sequence.num_output() - 1));
  delta.add_token_ids(token);
  if (options.logprobs || options.top_logprobs > 0) FillLogprob(sampled, options, *delta.add_logprobs());

  const auto finish = [&](v1::FinishReason reason, std::string stop_reason) {
    delta.set_finish_reason(reason);
    delta.set_stop_reason(std::move(stop_reason));
  };
  if (disallowed) {
    // Only a draw from an empty mask brings a token outside allowed_token_ids or one that completes a bad word
    // (the restrictions and the suppressed ids left nothing). Like an end token, it ends the answer and its
    // text is not part of it.
    delta.set_text(Flush(sequence));
    finish(v1::FINISH_REASON_STOP, "");
    return delta;
  }
  if (ConstraintState* constraint = sequence.group.constraint.get(); constraint != nullptr) {
    grammar::GrammarMatcher& matcher = constraint->matcher(sequence.choice_index);
    // Only a draw from an empty mask (the suppressed ids exclude every token the grammar allows, or the
    // grammar met its bounds on ambiguity) brings a token the grammar refuses; it ends the answer the same way.
    if (!matcher.AcceptToken(token)) {
      delta.set_text(Flush(sequence));
      finish(v1::FINISH_REASON_STOP, "");
      return delta;
    }
    if (eos_token_ids_.contains(token)) {
      // The grammar took the end token: the answer is complete, whatever min_tokens and ignore_eos ask.
      delta.set_text(Flush(sequence));
      finish(v1::FINISH_REASON_STOP, "");
      return delta;
    }
    if (matcher.IsTerminated()) {
      // Complete, and nothing may follow: the answer is whole without waiting for the model's EOS.
      tokenizer::StopStringMatcher::Result text = sequence.stop_matcher.Add(sequence.detokenizer.Add(token));
      text.text += text.stopped ? "" : Flush(sequence);
      delta.set_text(std::move(text.text));
      finish(v1::FINISH_REASON_STOP, text.stopped ? text.matched : "");
      return delta;
    }
  }
  const bool past_min_tokens = sequence.num_output() > options.min_tokens;
  const bool is_eos = !options.ignore_eos && eos_token_ids_.contains(token);
  if (past_min_tokens && (is_eos || Contains(options.stop_token_ids, token))) {
    // The stop token's own text is not part of the answer.
    delta.set_text(Flush(sequence));
    finish(v1::FINISH_REASON_STOP, is_eos ? "" : absl::StrCat(token));
    return delta;
  }
  tokenizer::StopStringMatcher::Result text =
      sequence.stop_matcher.Add(sequence.detokenizer.Add(token), /*may_stop=*/past_min_tokens);
  if (text.stopped) {
    delta.set_text(std::move(text.text));
    finish(v1::FINISH_REASON_STOP, text.matched);
    return delta;
  }
  if (sequence.num_output() >= options.max_tokens || static_cast<int64_t>(sequence.tokens.size()) >= max_model_len_) {
    text.text += Flush(sequence);
    finish(v1::FINISH_REASON_LENGTH, "");
  }
  delta.set_text(std::move(text.text));
  return delta;
}

}  // namespace llmc::engine
