#ifndef LLMC_WORKER_ENGINE_OUTPUT_PROCESSOR_H_
#define LLMC_WORKER_ENGINE_OUTPUT_PROCESSOR_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "common/utf8.h"
#include "llmc/v1/worker.pb.h"
#include "worker/engine/sampler.h"
#include "worker/engine/sequence.h"
#include "worker/model/model_manifest.h"
#include "worker/tokenizer/tokenizer.h"

namespace llmc::engine {

// What happens to a sampled token: it is appended, turned into streamed text (whole characters only, stop
// strings held back and never leaked), checked against the stop conditions (EOS unless ignore_eos, stop
// token ids, stop strings, max_tokens, the context length) and packed into the choice's delta.
class OutputProcessor {
 public:
  OutputProcessor(const tokenizer::Tokenizer& tokenizer, const model::ModelManifest& manifest, int64_t max_model_len);

  // Appends `sampled` to `sequence` and returns its delta. When a stop condition holds, the delta carries
  // the finish reason (the caller ends the choice).
  v1::TokenDelta Append(Sequence& sequence, const SampledToken& sampled) const;

  bool IsEos(int32_t token) const { return eos_token_ids_.contains(token); }

  // Token ids the sampler must not pick for `sequence` this step: EOS and stop ids before min_tokens (EOS
  // only while its grammar, if any, may not end), and the last token of each bad word its output leads into.
  void SuppressedTokens(const Sequence& sequence, std::vector<int32_t>& out) const;

  // Sets the id, text and bytes of token `id` on a v1::TokenLogprob or v1::TopLogprob.
  template <typename Entry>
  void DescribeToken(int32_t id, Entry& entry) const {
    const absl::string_view bytes = tokenizer_.TokenBytes(id);
    entry.set_token_id(id);
    entry.set_token(ReplaceInvalidUtf8(bytes));
    entry.set_token_bytes(std::string(bytes));
  }

 private:
  void BannedWordEnds(const Sequence& sequence, std::vector<int32_t>& out) const;
  // Whether allowed_token_ids and bad_words let `token` follow the output so far.
  bool Allowed(const Sequence& sequence, int32_t token) const;
  void FillLogprob(const SampledToken& sampled, const SamplingOptions& options, v1::TokenLogprob& out) const;
  // Releases whatever the detokenizer and the stop matcher still hold.
  std::string Flush(Sequence& sequence) const;

  const tokenizer::Tokenizer& tokenizer_;
  const absl::flat_hash_set<int32_t> eos_token_ids_;
  const int64_t max_model_len_;
};

}  // namespace llmc::engine

#endif  // LLMC_WORKER_ENGINE_OUTPUT_PROCESSOR_H_
