// The C++ loader and operators run the serving scenario on a package exported by the Python exporter, and
// match the Python full-recompute reference.
#include "worker/model/loaded_model.h"

#include <torch/cuda.h>
#include <torch/script.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <random>

#include "nlohmann/json.hpp"
#include "tests/support/child_process.h"
#include "tests/support/tokenizer_files.h"

namespace llmc::model {
namespace {

constexpr int64_t kBlockSize = 16;
constexpr int kSteps = 32;

// Runs tests/python/make_parity_fixture.py once per dtype and returns its folder.
std::string Fixture(const std::string& dtype) {
  static std::map<std::string, std::string> made;
  auto& dir = made[dtype];
  if (dir.empty()) {
    dir = testing::MakeTempDir("llmc-parity-" + dtype);
    const auto result =
        testing::RunCommand(LLMC_PYTHON,
                            {std::string(LLMC_SOURCE_DIR) + "/tests/python/make_parity_fixture.py", "--out", dir,
                             "--dtype", dtype, "--tokenizer", testing::TokenizerJsonPath("qwen3")},
                            absl::Seconds(240));
    if (result.exit_code != 0) throw std::runtime_error("fixture script failed:\n" + result.output);
  }
  return dir;
}

struct Reference {
  std::vector<at::Tensor> prompts, continuations, logits;
};

Reference LoadReference(const std::string& dir) {
  torch::jit::Module module = torch::jit::load(dir + "/reference.pt");
  Reference reference;
  for (const auto& t : module.attr("prompts").toTensorList()) reference.prompts.push_back(t);
  for (const auto& t : module.attr("continuations").toTensorList()) reference.continuations.push_back(t);
  for (const auto& t : module.attr("logits").toTensorList()) reference.logits.push_back(t);
  return reference;
}

// The engine's bookkeeping in miniature: scattered blocks, slot mapping, one flattened batch per step.
class PagedRunner {
 public:
  PagedRunner(LoadedModel& model, int64_t num_blocks) : model_(model) {
    cache_ = model.AllocateKvCache(num_blocks, kBlockSize).value();
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
      while (static_cast<int64_t>(blocks.size()) * kBlockSize < total) {
        blocks.push_back(free_.back());
        free_.pop_back();
      }
      for (size_t i = 0; i < tokens.size(); ++i) {
        const int64_t position = done + static_cast<int64_t>(i);
        ids.push_back(tokens[i]);
        positions.push_back(position);
        slots.push_back(blocks[position / kBlockSize] * kBlockSize + position % kBlockSize);
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
    ForwardBatch batch{
        at::tensor(ids, at::kLong),    at::tensor(positions, at::kLong), at::tensor(slots, at::kLong), block_tables,
        at::tensor(lengths, at::kInt), at::tensor(starts, at::kInt),     at::tensor(rows, at::kLong)};
    const at::Tensor logits = model_.Forward(batch, cache_).value();
    std::vector<at::Tensor> result;
    for (int64_t i = 0; i < logits.size(0); ++i) result.push_back(logits[i]);
    return result;
  }

 private:
  LoadedModel& model_;
  at::Tensor cache_;
  std::vector<int32_t> free_;
  std::map<int, std::vector<int32_t>> blocks_;
  std::map<int, int64_t> cached_;
};

std::vector<int64_t> ToVector(const at::Tensor& tensor) {
  return std::vector<int64_t>(tensor.data_ptr<int64_t>(), tensor.data_ptr<int64_t>() + tensor.numel());
}

// Sequences 0..2 prefill together; sequence 3 joins at step 5 in two chunks mixed with decode tokens. With
// `teacher_forcing` the reference tokens are fed instead of the model's own greedy choices.
void RunScenario(LoadedModel& model, const Reference& reference, double tolerance, bool teacher_forcing) {
  PagedRunner runner(model, 64);
  std::map<int, std::vector<int64_t>> generated;
  std::map<int, int> step_of;
  std::vector<std::pair<int, std::vector<int64_t>>> chunks;
  for (int s = 0; s < 3; ++s) chunks.emplace_back(s, ToVector(reference.prompts[s]));
  const std::vector<int64_t> late = ToVector(reference.prompts[3]);
  int compared = 0, agreed = 0;
  for (int step = 0; !chunks.empty(); ++step) {
    const auto logits = runner.Step(chunks);
    std::vector<std::pair<int, std::vector<int64_t>>> next;
    for (size_t i = 0; i < chunks.size(); ++i) {
      const int s = chunks[i].first;
      if (s == 3 && step == 5) continue;  // the first half of a prompt: nothing to sample
      const int k = step_of[s]++;
      const at::Tensor expected = reference.logits[s][k];
      const double difference = (logits[i] - expected).abs().max().item<double>();
      const int64_t ours = logits[i].argmax().item<int64_t>();
      const int64_t theirs = reference.continuations[s][k].item<int64_t>();
      INFO("sequence " << s << " step " << k << " difference " << difference);
      CHECK(difference < tolerance);
      if (!teacher_forcing) CHECK(ours == theirs);
      agreed += ours == theirs;
      ++compared;
      if (k + 1 < kSteps) next.emplace_back(s, std::vector<int64_t>{teacher_forcing ? theirs : ours});
    }
    if (step == 4) next.emplace_back(3, std::vector<int64_t>(late.begin(), late.begin() + 20));
    if (step == 5) next.emplace_back(3, std::vector<int64_t>(late.begin() + 20, late.end()));
    chunks = std::move(next);
  }
  CHECK(compared == 4 * kSteps);
  WARN("greedy agreement " << agreed << "/" << compared);
}

TEST_CASE("loaded model: float32 logits match the full-recompute reference, greedy tokens identical for 32 steps",
          "[integration][model]") {
  const std::string dir = Fixture("float32");
  auto model = LoadedModel::Load(dir + "/package", {"cpu", ""});
  REQUIRE(model.ok());
  CHECK((*model)->manifest().name == "tiny-parity");
  CHECK((*model)->dtype() == at::kFloat);
  RunScenario(**model, LoadReference(dir), 1e-4, /*teacher_forcing=*/false);
}

TEST_CASE("loaded model: bfloat16 logits stay within 3e-2 of the bfloat16 reference", "[integration][model]") {
  const std::string dir = Fixture("bfloat16");
  auto model = LoadedModel::Load(dir + "/package", {"cpu", ""});
  REQUIRE(model.ok());
  CHECK((*model)->dtype() == at::kBFloat16);
  RunScenario(**model, LoadReference(dir), 3e-2, /*teacher_forcing=*/true);
}

TEST_CASE("loaded model: a float32 package can be served in bfloat16", "[integration][model]") {
  const std::string dir = Fixture("float32");
  auto model = LoadedModel::Load(dir + "/package", {"cpu", "bfloat16"});
  REQUIRE(model.ok());
  CHECK((*model)->dtype() == at::kBFloat16);
  CHECK((*model)->KvCacheBlockBytes(16) == 2 * 2 * 16 * 2 * 32 * 2);
  RunScenario(**model, LoadReference(dir), 5e-2, /*teacher_forcing=*/true);
}

std::string CopyPackage(const std::string& from) {
  const std::string to = testing::MakeTempDir("llmc-package");
  std::filesystem::copy(from, to,
                        std::filesystem::copy_options::recursive | std::filesystem::copy_options::overwrite_existing);
  return to;
}

void EditManifest(const std::string& dir, const std::function<void(nlohmann::json&)>& edit) {
  nlohmann::json manifest;
  {
    std::ifstream in(dir + "/llmc-model.json");
    in >> manifest;
  }
  edit(manifest);
  std::ofstream(dir + "/llmc-model.json") << manifest.dump(2);
}

TEST_CASE("loaded model: corrupt or mismatched packages give the expected error", "[integration][model]") {
  const std::string good = Fixture("float32") + "/package";
  const auto error = [](const std::string& dir, LoadOptions options = {"cpu", ""}) {
    auto model = LoadedModel::Load(dir, options);
    REQUIRE_FALSE(model.ok());
    return model.status();
  };

  CHECK(error("/nonexistent/package").code() == absl::StatusCode::kNotFound);

  std::string dir = CopyPackage(good);
  std::filesystem::remove(dir + "/model.pt");
  CHECK_THAT(std::string(error(dir).message()), Catch::Contains("no model.pt"));

  dir = CopyPackage(good);
  std::filesystem::resize_file(dir + "/model.pt", 4096);
  auto status = error(dir);
  CHECK(status.code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(status.message()), Catch::Contains("corrupt or not TorchScript"));

  dir = CopyPackage(good);
  EditManifest(dir, [](nlohmann::json& m) { m["format_version"] = 2; });
  status = error(dir);
  CHECK(status.code() == absl::StatusCode::kFailedPrecondition);
  CHECK_THAT(std::string(status.message()), Catch::Contains("format version 2 is not supported"));

  dir = CopyPackage(good);
  EditManifest(dir, [](nlohmann::json& m) { m["num_layers"] = 3; });
  CHECK_THAT(std::string(error(dir).message()), Catch::Contains("model.pt has no parameter model.layers.2"));

  dir = CopyPackage(good);
  EditManifest(dir, [](nlohmann::json& m) { m["num_layers"] = 1; });
  CHECK_THAT(std::string(error(dir).message()), Catch::Contains("more layers than the manifest"));

  dir = CopyPackage(good);
  EditManifest(dir, [](nlohmann::json& m) { m["num_kv_heads"] = 4; });
  CHECK_THAT(std::string(error(dir).message()), Catch::Contains("self_attn.k_proj.weight is [64, 128]"));

  dir = CopyPackage(good);
  EditManifest(dir, [](nlohmann::json& m) { m["dtype"] = "float16"; });
  CHECK_THAT(std::string(error(dir).message()), Catch::Contains("unsupported dtype 'float16'"));

  dir = CopyPackage(good);
  EditManifest(dir, [](nlohmann::json& m) { m.erase("hidden_size"); });
  CHECK_THAT(std::string(error(dir).message()), Catch::Contains("'hidden_size' must be a positive integer"));

  CHECK_THAT(std::string(error(good, {"cpu", "int8"}).message()), Catch::Contains("unsupported dtype 'int8'"));
  if (!torch::cuda::is_available()) {
    CHECK(error(good, {"cuda", ""}).code() == absl::StatusCode::kFailedPrecondition);
  }
}

TEST_CASE("loaded model: bad batches are INVALID_ARGUMENT and the model keeps working", "[integration][model]") {
  auto model = LoadedModel::Load(Fixture("float32") + "/package", {"cpu", ""});
  REQUIRE(model.ok());
  at::Tensor cache = (*model)->AllocateKvCache(4, kBlockSize).value();
  ForwardBatch bad{at::tensor({1, 2}, at::kLong), at::tensor({0, 1}, at::kLong), at::tensor({0, 999}, at::kLong),
                   at::zeros({1, 1}, at::kInt),   at::tensor({2}, at::kInt),     at::tensor({0, 2}, at::kInt),
                   at::tensor({1}, at::kLong)};
  auto result = (*model)->Forward(bad, cache);
  REQUIRE_FALSE(result.ok());
  CHECK(result.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(result.status().message()), Catch::Contains("slot outside the cache"));
  ForwardBatch good = bad;
  good.slot_mapping = at::tensor({0, 1}, at::kLong);
  auto logits = (*model)->Forward(good, cache);
  REQUIRE(logits.ok());
  CHECK(logits->sizes() == at::IntArrayRef({1, 512}));
  CHECK((*model)->AllocateKvCache(0, 16).status().code() == absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace llmc::model
