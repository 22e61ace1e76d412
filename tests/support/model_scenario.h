#ifndef LLMC_TESTS_SUPPORT_MODEL_SCENARIO_H_
#define LLMC_TESTS_SUPPORT_MODEL_SCENARIO_H_

#include <memory>
#include <string>
#include <vector>

#include "tests/support/collecting_sink.h"
#include "worker/engine/engine.h"
#include "worker/model/loaded_model.h"
#include "worker/tokenizer/tokenizer.h"

namespace llmc::testing {

// A tiny random package and its full-recompute reference, made once per dtype (and package format
// version; 0: the exporter's current one) by tests/python/make_parity_fixture.py; returns the folder
// (package/ and reference.pt inside).
std::string ParityFixture(const std::string& dtype);

struct ModelReference {
  std::vector<at::Tensor> prompts, continuations, logits;  // per sequence: prompt, 32 greedy tokens, logits
  // Per prompt: its embedding pooled from the last token and from the mean of all, L2-normalized float32.
  std::vector<at::Tensor> last_embeddings, mean_embeddings;
};
ModelReference LoadModelReference(const std::string& fixture_dir);
// A model family's fixture: tests/python/`script` (make_family_fixture.py, make_qwen3_fixture.py,
// make_mistral_fixture.py) run with `args` and --out a new folder, once per test process and arguments; returns
// the folder (checkpoint/, package/ and reference.pt inside). Throws with the script's output when it fails.
std::string FamilyFixture(const std::string& script, const std::vector<std::string>& args);
// The largest absolute logit of the reference, the scale of the families' dtype bounds.
double LargestLogit(const ModelReference& reference);
// Loads `package` with `options`, failing the test with the loader's message when it cannot.
std::unique_ptr<model::LoadedModel> LoadModelOrFail(const std::string& package, const model::LoadOptions& options);

// The float32 fixture (made once): its folder, reference and tokenizer.
const std::string& Float32ParityDir();
const ModelReference& Float32ParityReference();
const tokenizer::Tokenizer& Float32ParityTokenizer();
// An engine on the package in `package_dir` (the fixture's, or a changed copy of it), with the fixture's
// tokenizer, started; fails the test when it cannot start.
std::unique_ptr<engine::Engine> StartParityEngine(const std::string& package_dir, const engine::EngineOptions& options,
                                                  engine::EngineObserver* observer = nullptr);
// StartParityEngine on the float32 fixture's own package.
inline std::unique_ptr<engine::Engine> StartFloat32ParityEngine(const engine::EngineOptions& options,
                                                                engine::EngineObserver* observer = nullptr) {
  return StartParityEngine(Float32ParityDir() + "/package", options, observer);
}
// A 64 MiB KV cache, up to 8 running and 64 waiting requests, and 24 tokens a step: the fixture's prompts (33
// and 40 tokens, say) prefill in chunks beside decodes.
inline engine::EngineOptions SmallParityEngineOptions() {
  engine::EngineOptions options;
  options.kv_cache_bytes = 64 << 20;
  options.max_num_batched_tokens = 24;
  options.max_running = 8;
  options.max_waiting = 64;
  return options;
}
// A reference tensor of token ids as a vector.
std::vector<int32_t> ToIds(const at::Tensor& tensor);
// The reference's own continuation request for `prompt`: greedy, 32 tokens, ignoring EOS.
engine::GenerationRequest ReferenceGreedyRequest(const at::Tensor& prompt);
// Submits `request` with a fresh CollectingSink (the submission must be accepted) and returns the sink.
std::shared_ptr<CollectingSink> SubmitCollecting(engine::Engine& engine, engine::GenerationRequest request);

// The serving scenario through `model`: three sequences prefilled together, a fourth joining at step 5 in
// two chunks mixed with decode tokens, 32 greedy steps each; every logits row must be within `tolerance` of
// the reference and, unless `teacher_forcing` (feed the reference tokens), the greedy tokens identical.
// Returns the largest difference of any logit. With `required_fraction` below 1, that fraction of the rows
// must be within `tolerance` (a mixture of experts in bfloat16 or int8: a row whose router sees two experts
// nearly tied may choose the other one under rounding, and its logits move by design).
double RunModelScenario(model::LoadedModel& model, const ModelReference& reference, double tolerance,
                        bool teacher_forcing, double required_fraction = 1.0);
// The logits rows of the same scenario with the reference's tokens fed, in the order they are sampled: prefill
// chunks of several sequences, then decode steps of three and four rows.
std::vector<at::Tensor> ScenarioLogits(model::LoadedModel& model, const ModelReference& reference);

}  // namespace llmc::testing

#endif  // LLMC_TESTS_SUPPORT_MODEL_SCENARIO_H_
