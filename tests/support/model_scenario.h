#ifndef LLMC_TESTS_SUPPORT_MODEL_SCENARIO_H_
#define LLMC_TESTS_SUPPORT_MODEL_SCENARIO_H_

#include <string>
#include <vector>

#include "worker/model/loaded_model.h"

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

// The serving scenario through `model`: three sequences prefilled together, a fourth joining at step 5 in
// two chunks mixed with decode tokens, 32 greedy steps each; every logits row must be within `tolerance` of
// the reference and, unless `teacher_forcing` (feed the reference tokens), the greedy tokens identical.
void RunModelScenario(model::LoadedModel& model, const ModelReference& reference, double tolerance,
                      bool teacher_forcing);

}  // namespace llmc::testing

#endif  // LLMC_TESTS_SUPPORT_MODEL_SCENARIO_H_
