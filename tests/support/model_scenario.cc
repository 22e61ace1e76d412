#include "tests/support/model_scenario.h"

#include <torch/script.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "tests/support/catch.h"
#include "tests/support/fixture_cache.h"
#include "tests/support/tokenizer_files.h"

namespace llmc::testing {
namespace {
constexpr int64_t kScenarioBlockSize = 16;
constexpr int kSteps = 32;

}  // namespace

std::string FamilyFixture(const std::string& script, const std::vector<std::string>& args) {
  static absl::Mutex mu(absl::kConstInit);
  static std::map<std::string, std::string>* made = new std::map<std::string, std::string>();
  absl::MutexLock lock(&mu);
  std::string& dir = (*made)[absl::StrCat(script, " ", absl::StrJoin(args, " "))];
  if (dir.empty()) {
    std::vector<std::string> command = {std::string(LLMC_SOURCE_DIR) + "/tests/python/" + script};
    command.insert(command.end(), args.begin(), args.end());
    dir = CachedFolder(script.substr(0, script.find('.')), command,
                       [&](const std::string& out) { RunPythonInto(command, out, script); });
  }
  return dir;
}

std::string ParityFixture(const std::string& dtype) {
  return FamilyFixture("make_parity_fixture.py", {"--dtype", dtype, "--tokenizer", TokenizerJsonPath("qwen3")});
}

double LargestLogit(const ModelReference& reference) {
  double largest = 0;
  for (const at::Tensor& logits : reference.logits) largest = std::max(largest, logits.abs().max().item<double>());
  return largest;
}

std::unique_ptr<model::LoadedModel> LoadModelOrFail(const std::string& package, const model::LoadOptions& options) {
  absl::StatusOr<std::unique_ptr<model::LoadedModel>> model = model::LoadedModel::Load(package, options);
  INFO(model.status().ToString());
  REQUIRE(model.ok());
  return std::move(*model);
}

ModelReference LoadModelReference(const std::string& dir) {
  torch::jit::Module module = torch::jit::load(dir + "/reference.pt");
  ModelReference reference;
  for (const auto& t : module.attr("prompts").toTensorList()) reference.prompts.push_back(t);
  for (const auto& t : module.attr("continuations").toTensorList()) reference.continuations.push_back(t);
  for (const auto& t : module.attr("logits").toTensorList()) reference.logits.push_back(t);
  for (const auto& t : module.attr("last_embeddings").toTensorList()) reference.last_embeddings.push_back(t);
  for (const auto& t : module.attr("mean_embeddings").toTensorList()) reference.mean_embeddings.push_back(t);
  return reference;
}

const std::string& Float32ParityDir() {
  static const std::string dir = ParityFixture("float32");
  return dir;
}

const ModelReference& Float32ParityReference() {
  static const ModelReference reference = LoadModelReference(Float32ParityDir());
  return reference;
}

const tokenizer::Tokenizer& Float32ParityTokenizer() {
  static const std::unique_ptr<tokenizer::Tokenizer> tokenizer =
      tokenizer::Tokenizer::FromFile(Float32ParityDir() + "/package/tokenizer.json").value();
  return *tokenizer;
}

std::unique_ptr<engine::Engine> StartParityEngine(const std::string& package_dir, const engine::EngineOptions& options,
                                                  engine::EngineObserver* observer) {
  auto model = model::LoadedModel::Load(package_dir, {"cpu", ""});
  REQUIRE(model.ok());
  auto engine = engine::Engine::Create(std::move(*model), Float32ParityTokenizer(), options, observer);
  REQUIRE(engine.ok());
  REQUIRE((*engine)->Start().ok());
  return std::move(*engine);
}

engine::GenerationRequest ReferenceGreedyRequest(const at::Tensor& prompt) {
  engine::GenerationRequest request;
  request.request_id = "greedy";
  request.prompt_token_ids = ToIds(prompt);
  request.sampling.temperature = 0;
  request.sampling.max_tokens = 32;
  request.sampling.ignore_eos = true;
  return request;
}

std::shared_ptr<CollectingSink> SubmitCollecting(engine::Engine& engine, engine::GenerationRequest request) {
  auto sink = std::make_shared<CollectingSink>();
  REQUIRE(engine.Submit(std::move(request), sink).ok());
  return sink;
}

std::vector<int32_t> ToIds(const at::Tensor& tensor) {
  const at::Tensor ints = tensor.to(at::kInt).contiguous();
  return std::vector<int32_t>(ints.data_ptr<int32_t>(), ints.data_ptr<int32_t>() + ints.numel());
}

namespace {

// The engine's bookkeeping in miniature: scattered blocks, slot mapping, one flattened batch per step.
class PagedRunner {
 public:
  PagedRunner(model::LoadedModel& model, int64_t num_blocks) : model_(model) {
    cache_ = model.AllocateKvCache(num_blocks, kScenarioBlockSize).value();
    free_.resize(num_blocks);
    std::iota(free_.begin(), free_.end(), 0);
    std::shuffle(free_.begin(), free_.end(), std::mt19937(7));
  }

  // chunks: (sequence, new tokens); returns the logits row of each chunk's last token.
  std::vector<at::Tensor> Step(const std::vector<std::pair<int, std::vector<int64_t>>>& chunks) {
    std::vector<int64_t> ids, positions, slots, rows;
    std::vector<int32_t> lengths, starts = {0};
    std::vector<std::vector<int32_t>> tables;
    for (const auto& [sequence, tokens] : chunks) {
      auto& blocks = blocks_[sequence];
      const int64_t done = cached_[sequence], total = done + static_cast<int64_t>(tokens.size());
      while (static_cast<int64_t>(blocks.size()) * kScenarioBlockSize < total) {
        blocks.push_back(free_.back());
        free_.pop_back();
      }
      for (size_t i = 0; i < tokens.size(); ++i) {
        const int64_t position = done + static_cast<int64_t>(i);
        ids.push_back(tokens[i]);
        positions.push_back(position);
        slots.push_back(blocks[position / kScenarioBlockSize] * kScenarioBlockSize + position % kScenarioBlockSize);
      }
      cached_[sequence] = total;
      starts.push_back(static_cast<int32_t>(ids.size()));
      lengths.push_back(static_cast<int32_t>(total));
      tables.push_back(blocks);
      rows.push_back(static_cast<int64_t>(ids.size()) - 1);
    }
    size_t width = 0;
    for (const auto& t : tables) width = std::max(width, t.size());
    at::Tensor block_tables = at::zeros({static_cast<int64_t>(tables.size()), static_cast<int64_t>(width)}, at::kInt);
    for (size_t s = 0; s < tables.size(); ++s) {
      for (size_t b = 0; b < tables[s].size(); ++b) block_tables[s][b] = tables[s][b];
    }
    model::ForwardBatch batch{
        at::tensor(ids, at::kLong),    at::tensor(positions, at::kLong), at::tensor(slots, at::kLong), block_tables,
        at::tensor(lengths, at::kInt), at::tensor(starts, at::kInt),     at::tensor(rows, at::kLong)};
    // On CUDA the logits stay on the device; the reference is on the CPU.
    const at::Tensor logits = model_.Forward(batch, cache_).value().to(at::kCPU);
    std::vector<at::Tensor> result;
    for (int64_t i = 0; i < logits.size(0); ++i) result.push_back(logits[i]);
    return result;
  }

 private:
  model::LoadedModel& model_;
  at::Tensor cache_;
  std::vector<int32_t> free_;
  std::map<int, std::vector<int32_t>> blocks_;
  std::map<int, int64_t> cached_;
};

std::vector<int64_t> ToVector(const at::Tensor& tensor) {
  return std::vector<int64_t>(tensor.data_ptr<int64_t>(), tensor.data_ptr<int64_t>() + tensor.numel());
}

}  // namespace

namespace {

// Sequences 0..2 prefill together; sequence 3 joins at step 5 in two chunks mixed with decode tokens. Each
// sampled row goes to on_row(sequence, step, logits), which returns the token the sequence is fed next.
template <typename OnRow>
void WalkScenario(model::LoadedModel& model, const ModelReference& reference, OnRow on_row) {
  PagedRunner runner(model, 64);
  std::map<int, int> step_of;
  std::vector<std::pair<int, std::vector<int64_t>>> chunks;
  for (int s = 0; s < 3; ++s) chunks.emplace_back(s, ToVector(reference.prompts[s]));
  const std::vector<int64_t> late = ToVector(reference.prompts[3]);
  for (int step = 0; !chunks.empty(); ++step) {
    const auto logits = runner.Step(chunks);
    std::vector<std::pair<int, std::vector<int64_t>>> next;
    for (size_t i = 0; i < chunks.size(); ++i) {
      const int s = chunks[i].first;
      if (s == 3 && step == 5) continue;  // the first half of a prompt: nothing to sample
      const int k = step_of[s]++;
      const int64_t token = on_row(s, k, logits[i]);
      if (k + 1 < kSteps) next.emplace_back(s, std::vector<int64_t>{token});
    }
    if (step == 4) next.emplace_back(3, std::vector<int64_t>(late.begin(), late.begin() + 20));
    if (step == 5) next.emplace_back(3, std::vector<int64_t>(late.begin() + 20, late.end()));
    chunks = std::move(next);
  }
}

}  // namespace

double RunModelScenario(model::LoadedModel& model, const ModelReference& reference, double tolerance,
                        bool teacher_forcing, double required_fraction) {
  int compared = 0, agreed = 0, within = 0;
  double largest = 0;
  WalkScenario(model, reference, [&](int s, int k, const at::Tensor& logits) {
    const at::Tensor expected = reference.logits[s][k];
    const double difference = (logits - expected).abs().max().item<double>();
    const int64_t ours = logits.argmax().item<int64_t>();
    const int64_t theirs = reference.continuations[s][k].item<int64_t>();
    INFO("sequence " << s << " step " << k << " difference " << difference);
    if (required_fraction >= 1.0) CHECK(difference < tolerance);
    within += difference < tolerance;
    largest = std::max(largest, difference);
    if (!teacher_forcing) CHECK(ours == theirs);
    agreed += ours == theirs;
    ++compared;
    return teacher_forcing ? theirs : ours;
  });
  CHECK(compared == 4 * kSteps);
  WARN("greedy agreement " << agreed << "/" << compared << ", " << within << " rows within " << tolerance);
  CHECK(within >= required_fraction * compared);
  return largest;
}

std::vector<at::Tensor> ScenarioLogits(model::LoadedModel& model, const ModelReference& reference) {
  std::vector<at::Tensor> rows;
  WalkScenario(model, reference, [&](int s, int k, const at::Tensor& logits) {
    rows.push_back(logits);
    return reference.continuations[s][k].item<int64_t>();
  });
  return rows;
}

}  // namespace llmc::testing
