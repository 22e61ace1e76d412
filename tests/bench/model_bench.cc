// Forward step time of a model package through the C++ loader and operators: decode batches and a long
// prefill, with tokens/s and the ratio to the weight-bandwidth limit (weight bytes ÷ the machine's best
// multi-threaded read bandwidth, measured here in the same run). With several packages (bfloat16 and int8,
// say) they take turns in every run and the speed-up of each over the first is printed. Prints figures;
// judges nothing.
//
//   llmc_model_bench [--profile] <package-dir>[SUFFIXES] [...]
//   llmc_model_bench --contexts=512,8192 <package-dir> ...
//   llmc_model_bench --back-to-back=N <package-dir> ...
//
// SUFFIXES, in this order: [:QUANTIZATION][:small-pages][:no-read-ahead][:fresh-outputs][:unfrozen][:prefetch-l1|2].
// QUANTIZATION: int8, w8a16, w8a8, int4, w4a16 or w4a8; :no-read-ahead turns off the read-ahead between operators
// (worker/model/cpu/read_ahead.h) for that package's steps, to compare with and without it in one run;
// :unfrozen loads it without freezing its module (LoadOptions::freeze_graphs); :fresh-outputs runs its steps with
// new output tensors for every operator (worker/model/cpu/output_pool.h);
// :prefetch-l1 and :prefetch-l2 set where the 4-bit kernels prefetch weights to (cpu_isa.h, WeightPrefetch) for
// that package's steps (otherwise this CPU's choice).
//
// --contexts measures only decode b=1 with each given number of tokens already cached, and each step's ratio
// to the first context's (what sliding-window layers save: Gemma 3's local layers read only their window); with
// --profile, where those steps' time goes.
//
// --back-to-back=N runs N greedy decode b=1 steps after 32 tokens one right after another, with no read of
// memory between them (as a stream that decodes without pause runs them), the packages taking turns step by
// step, and prints their median and best against the weights' read limit: the run to record under `perf record`.
// With --profile, then 100 more steps of each package back to back under the step profiler (below).
//
// --profile also prints, for decode b=1, 8, 32 and the 512-token prefill, where one step's time goes: per
// operator kind and per layer (tests/bench/step_profiler.h).
#include <ATen/Parallel.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "tests/bench/step_profiler.h"
#include "tests/bench/stream_reader.h"
#include "worker/model/cpu/cpu_isa.h"
#include "worker/model/cpu/huge_page_arena.h"
#include "worker/model/cpu/moe_ops.h"
#include "worker/model/cpu/output_pool.h"
#include "worker/model/cpu/read_ahead.h"
#include "worker/model/loaded_model.h"

namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point since) { return std::chrono::duration<double>(Clock::now() - since).count(); }

// One measurement of the streaming read bandwidth with the kernels' thread count over `buffer` (far larger
// than the caches): the better of ATen's sum and of the prefetching reader.
double ReadBandwidthGbPerSecond(const at::Tensor& buffer) {
  const double bytes = static_cast<double>(buffer.nbytes());
  double best = 0;
  const auto start = Clock::now();
  const float total = buffer.sum().item<float>();
  const double seconds = Seconds(start);
  if (total > 0) best = bytes / seconds / 1e9;
  return std::max(best, llmc::bench::PrefetchingReadGbPerSecond(static_cast<const char*>(buffer.data_ptr()),
                                                                buffer.nbytes(), at::get_num_threads()));
}

// The read bandwidth at this moment: the prefetching reader over as many bytes as a step's weights (up to the
// buffer's size).
double MomentReadGbPerSecond(const at::Tensor& buffer, double weight_bytes) {
  return llmc::bench::PrefetchingReadGbPerSecond(static_cast<const char*>(buffer.data_ptr()),
                                                 std::min<int64_t>(static_cast<int64_t>(weight_bytes), buffer.nbytes()),
                                                 at::get_num_threads());
}

// Bytes one decode step streams, in the weights' type (int8 packages: one byte per weight, int4 half a byte, plus
// one float32 scale per output row and group; MXFP4 experts half a byte plus a byte per 32; an unquantized untied
// embedding is counted as the LM head). A
// mixture of experts streams the dense part (attention, routers, dense MLPs, the LM head) and, once, each expert
// some row of the step chose: `per_expert` bytes each (moe_ops.h counts them per step).
struct StreamedBytes {
  int64_t dense = 0;
  int64_t per_expert = 0;
  // A decode step of one row: the dense part and experts_per_token experts in every sparse layer.
  int64_t SingleRow(const llmc::model::ModelManifest& m) const {
    return dense + per_expert * m.experts_per_token * static_cast<int64_t>(m.moe_layers.size());
  }
  int64_t All(const llmc::model::ModelManifest& m) const {
    return dense + per_expert * m.num_experts * static_cast<int64_t>(m.moe_layers.size());
  }
};

StreamedBytes Streamed(const llmc::model::ModelManifest& m, at::ScalarType dtype) {
  const int64_t element = static_cast<int64_t>(c10::elementSize(dtype));
  // int4 (served as int4, w4a16 or w4a8): two weights a byte.
  const bool int4 = m.quantization == "int4" || m.quantization == "w4a16" || m.quantization == "w4a8";
  // MXFP4 packages: the experts' codes half a byte a weight with a one-byte exponent per 32, the rest in dtype.
  const bool mxfp4 = m.quantization == "mxfp4";
  const auto matrix = [&](int64_t rows, int64_t k) -> int64_t {
    if (m.quantization == "none" || mxfp4) return rows * k * element;
    const int64_t groups = m.quantization_group_size == 0 ? 1 : k / m.quantization_group_size;
    return (int4 ? rows * k / 2 : rows * k) + 4 * rows * groups;
  };
  const auto expert_matrix = [&](int64_t rows, int64_t k) -> int64_t {
    return mxfp4 ? rows * k / 2 + rows * k / 32 : matrix(rows, k);
  };
  const int64_t qkv_rows = (m.num_heads + 2 * m.num_kv_heads) * m.head_dim, q_width = m.num_heads * m.head_dim;
  StreamedBytes bytes;
  const int64_t attention = matrix(qkv_rows, m.hidden_size) + matrix(m.hidden_size, q_width);
  const int64_t dense_mlp = matrix(2 * m.intermediate_size, m.hidden_size) + matrix(m.hidden_size, m.intermediate_size);
  const int64_t sparse_layers = static_cast<int64_t>(m.moe_layers.size());
  bytes.dense = m.num_layers * attention + (m.num_layers - sparse_layers) * dense_mlp +
                sparse_layers * m.num_experts * m.hidden_size * element + matrix(m.vocab_size, m.hidden_size);
  if (m.quantization == "none" && !m.tie_word_embeddings) bytes.dense += m.vocab_size * m.hidden_size * element;
  if (sparse_layers > 0) {
    bytes.per_expert = expert_matrix(2 * m.moe_intermediate_size, m.hidden_size) +
                       expert_matrix(m.hidden_size, m.moe_intermediate_size);
  }
  return bytes;
}

// `sequences` sequences, each with `context` tokens already cached, decoding one token each; or, with
// `prefill` > 0, one sequence prefilling that many tokens.
llmc::model::ForwardBatch MakeBatch(int64_t sequences, int64_t context, int64_t prefill, int64_t block_size,
                                    int64_t vocab) {
  const int64_t new_tokens = prefill > 0 ? prefill : 1;
  const int64_t total = context + new_tokens;
  const int64_t blocks_per_sequence = (total + block_size - 1) / block_size;
  std::vector<int64_t> ids, positions, slots, rows;
  std::vector<int32_t> lengths, starts = {0};
  at::Tensor tables = at::zeros({sequences, blocks_per_sequence}, at::kInt);
  for (int64_t s = 0; s < sequences; ++s) {
    for (int64_t b = 0; b < blocks_per_sequence; ++b) tables[s][b] = static_cast<int32_t>(s * blocks_per_sequence + b);
    for (int64_t t = 0; t < new_tokens; ++t) {
      const int64_t position = context + t;
      ids.push_back((s * 7919 + position * 31) % vocab);
      positions.push_back(position);
      slots.push_back((s * blocks_per_sequence + position / block_size) * block_size + position % block_size);
    }
    lengths.push_back(static_cast<int32_t>(total));
    starts.push_back(static_cast<int32_t>(ids.size()));
    rows.push_back(static_cast<int64_t>(ids.size()) - 1);
  }
  return {at::tensor(ids, at::kLong),    at::tensor(positions, at::kLong), at::tensor(slots, at::kLong), tables,
          at::tensor(lengths, at::kInt), at::tensor(starts, at::kInt),     at::tensor(rows, at::kLong)};
}

// One forward step: full float32 logits for every row, or, as the engine runs greedy rows, only each row's
// best logit kept in the LM head's pass.
absl::Status Step(llmc::model::LoadedModel& model, const llmc::model::ForwardBatch& batch, at::Tensor& cache,
                  bool greedy) {
  if (!greedy) return model.Forward(batch, cache).status();
  return model.ForwardForSampling(batch, cache, at::empty({0}, at::kLong), /*top_k=*/1).status();
}

// `runs` greedy steps of `batch` under the step profiler, then its tables under `title`.
absl::Status ProfileSteps(llmc::model::LoadedModel& model, const llmc::model::ForwardBatch& batch, at::Tensor& cache,
                          int runs, const std::string& title) {
  llmc::bench::StepProfiler profiler;
  for (int run = 0; run < runs; ++run) {
    profiler.Begin();
    const absl::Status status = Step(model, batch, cache, /*greedy=*/true);
    profiler.End();
    if (!status.ok()) return status;
  }
  profiler.Print(title);
  return absl::OkStatus();
}

// What a package's suffixes change for its steps only.
struct StepSettings {
  bool read_ahead = true;                                    // :no-read-ahead
  bool recycled_outputs = true;                              // :fresh-outputs
  std::optional<llmc::model::cpu::WeightPrefetch> prefetch;  // :prefetch-l1, :prefetch-l2
};

// One step in milliseconds, under the package's settings.
absl::StatusOr<double> TimedStep(llmc::model::LoadedModel& model, const llmc::model::ForwardBatch& batch,
                                 at::Tensor& cache, const StepSettings& settings, bool greedy) {
  llmc::model::cpu::SetReadAheadEnabled(settings.read_ahead);
  llmc::model::cpu::SetOutputRecyclingEnabled(settings.recycled_outputs);
  if (settings.prefetch.has_value()) llmc::model::cpu::ForceWeightPrefetch(*settings.prefetch);
  const auto start = Clock::now();
  const absl::Status status = Step(model, batch, cache, greedy);
  const double ms = Seconds(start) * 1e3;
  llmc::model::cpu::SetReadAheadEnabled(true);
  llmc::model::cpu::SetOutputRecyclingEnabled(true);
  if (settings.prefetch.has_value()) llmc::model::cpu::ResetWeightPrefetch();
  if (!status.ok()) return status;
  return ms;
}

}  // namespace

int main(int argc, char** argv) {
  bool profile = false, bandwidth_only = false;
  int64_t back_to_back = 0;
  std::vector<std::string> packages;
  std::vector<int64_t> contexts;
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--profile") {
      profile = true;
    } else if (std::string(argv[i]) == "--bandwidth") {
      bandwidth_only = true;
    } else if (absl::StartsWith(argv[i], "--back-to-back=")) {
      if (!absl::SimpleAtoi(absl::string_view(argv[i]).substr(15), &back_to_back) || back_to_back < 1 ||
          back_to_back > 100000) {
        std::fprintf(stderr, "--back-to-back takes a step count from 1 to 100000\n");
        return 2;
      }
    } else if (absl::StartsWith(argv[i], "--contexts=")) {
      for (absl::string_view value : absl::StrSplit(absl::string_view(argv[i]).substr(11), ',')) {
        int64_t context = 0;
        if (!absl::SimpleAtoi(value, &context) || context < 0 || context > 32768) {
          std::fprintf(stderr, "--contexts takes token counts up to 32768, not '%s'\n", std::string(value).c_str());
          return 2;
        }
        contexts.push_back(context);
      }
    } else {
      packages.emplace_back(argv[i]);
    }
  }
  if (packages.empty()) {
    std::fprintf(
        stderr,
        "usage: %s [--profile | --bandwidth | --contexts=N,... | --back-to-back=N] "
        "<package-dir>[:QUANTIZATION][:small-pages][:no-read-ahead][:fresh-outputs][:unfrozen][:prefetch-l1|2] ...\n",
        argv[0]);
    return 2;
  }
  // libtorch defaults to the number of physical cores, which on a 2-vCPU machine can be 1.
  const char* threads = std::getenv("LLMC_THREADS");
  at::set_num_threads(threads ? std::atoi(threads) : static_cast<int>(std::thread::hardware_concurrency()));
  // The bandwidth of a shared machine varies from minute to minute: it is measured before and between the
  // decode steps, and the best reading is the yardstick, so a step never looks fast against a slow spell.
  // On huge pages, as the packed weights are (worker/model/cpu/huge_page_arena.h).
  const at::Tensor read_buffer = llmc::model::cpu::EmptyOnHugePages({512LL * 1024 * 1024}, at::kFloat).fill_(1);
  double bandwidth = 0;
  for (int pass = 0; pass < 5; ++pass) bandwidth = std::max(bandwidth, ReadBandwidthGbPerSecond(read_buffer));
  if (bandwidth_only) {
    // The yardstick alone, for benchmarks of whole servers (scripts/bench-serving.sh): one stream cannot
    // decode faster than this many tokens per second.
    std::printf("read bandwidth %.1f GB/s with %d threads\n", bandwidth, at::get_num_threads());
    for (const std::string& package : packages) {
      auto manifest = llmc::model::ReadModelManifest(package);
      if (!manifest.ok()) return 1;
      const auto dtype = manifest->dtype == "float32" ? at::kFloat : at::kBFloat16;
      const double weight_bytes = static_cast<double>(Streamed(*manifest, dtype).SingleRow(*manifest));
      std::printf("%s: weights %.0f MB, one-stream limit %.1f tokens/s\n", package.c_str(), weight_bytes / 1e6,
                  bandwidth * 1e9 / weight_bytes);
    }
    return 0;
  }
  std::printf("threads %d\n", at::get_num_threads());
  constexpr int64_t kBlockSize = 16, kContext = 128;
  struct Shape {
    const char* label;
    int64_t sequences, prefill;
  };
  struct Row {
    const char* label;
    int64_t tokens;
    double full_ms, greedy_ms;
    double paired_fraction;  // median over runs of (weight bytes / step time) / the read just before it
    double bytes;            // what the step streamed (a mixture of experts: its chosen experts)
    double active_experts;   // experts chosen in the step, summed over the sparse layers
  };
  // Every package is loaded first and the packages take turns in each run of each shape, so a ratio between
  // them (int8 against bfloat16, say) compares steps taken in the same minutes of this shared machine.
  struct Measured {
    std::unique_ptr<llmc::model::LoadedModel> model;
    at::Tensor cache;
    StreamedBytes streamed;
    double weight_bytes = 0;  // one row's step
    std::string label;
    StepSettings settings;
    std::map<std::string, double> step_ms;
    std::vector<Row> rows;
    // Per shape, the greedy step of every run, in run order (for ratios run by run).
    std::map<std::string, std::vector<double>> run_ms;
  };
  std::vector<Measured> measured;
  for (const std::string& argument : packages) {
    // PACKAGE[:QUANTIZATION][:small-pages][:no-read-ahead][:fresh-outputs][:unfrozen][:prefetch-l1|2]: int8, w8a16,
    // w8a8, int4, w4a16 or w4a8 (quantized at load unless the package is quantized); small-pages keeps the weights and
    // the KV cache off huge pages. Only those suffixes are taken off, in that order from the end, so a path may hold
    // colons.
    std::string package = argument;
    llmc::model::LoadOptions options{"cpu", ""};
    const auto take_suffix = [&package](absl::string_view suffix) {
      if (!absl::EndsWith(package, suffix)) return false;
      package.resize(package.size() - suffix.size());
      return true;
    };
    StepSettings settings;
    if (take_suffix(":prefetch-l1")) settings.prefetch = llmc::model::cpu::WeightPrefetch::kToL1;
    if (take_suffix(":prefetch-l2")) settings.prefetch = llmc::model::cpu::WeightPrefetch::kToL2;
    if (take_suffix(":unfrozen")) options.freeze_graphs = false;
    settings.recycled_outputs = !take_suffix(":fresh-outputs");
    settings.read_ahead = !take_suffix(":no-read-ahead");
    if (take_suffix(":small-pages")) options.huge_pages = false;
    for (const char* quantization : {"int8", "w8a16", "w8a8", "int4", "w4a16", "w4a8"}) {
      if (take_suffix(absl::StrCat(":", quantization))) options.quantization = quantization;
    }
    const auto load_start = std::chrono::steady_clock::now();
    auto model = llmc::model::LoadedModel::Load(package, options);
    if (!model.ok()) {
      std::fprintf(stderr, "%s\n", std::string(model.status().message()).c_str());
      return 1;
    }
    // Loading includes any quantization at load (int4's scale search, for one).
    std::printf("%s: loaded in %.1f s\n", argument.c_str(),
                std::chrono::duration<double>(std::chrono::steady_clock::now() - load_start).count());
    std::fflush(stdout);
    Measured m;
    const auto& manifest = (*model)->manifest();
    m.streamed = Streamed(manifest, (*model)->dtype());
    m.weight_bytes = static_cast<double>(m.streamed.SingleRow(manifest));
    m.label = manifest.quantization == "none" ? manifest.dtype : manifest.quantization;
    if (!options.huge_pages) m.label += " 4K";
    m.settings = settings;
    if (!settings.read_ahead) m.label += " no-RA";
    if (!settings.recycled_outputs) m.label += " fresh";
    if (!options.freeze_graphs) m.label += " unfrozen";
    if (settings.prefetch.has_value()) {
      m.label += absl::StrCat(" pf-", llmc::model::cpu::WeightPrefetchName(*settings.prefetch));
    }
    const int64_t longest = contexts.empty() ? 0 : *std::max_element(contexts.begin(), contexts.end());
    auto cache = (*model)->AllocateKvCache(
        std::max<int64_t>(32 * ((kContext + 2048) / kBlockSize + 2), longest / kBlockSize + 2), kBlockSize);
    if (!cache.ok()) return 1;
    m.cache = *cache;
    m.model = *std::move(model);
    measured.push_back(std::move(m));
  }
  // Token ids every package's vocabulary holds.
  int64_t vocab = measured.front().model->manifest().vocab_size;
  for (const Measured& m : measured) vocab = std::min(vocab, m.model->manifest().vocab_size);
  if (back_to_back > 0) {
    // The packages take turns step by step, so the machine's slow and fast spells fall on all of them alike.
    const auto batch = MakeBatch(1, 32, 0, kBlockSize, vocab);
    std::vector<std::vector<double>> step_ms(measured.size());
    for (int64_t step = 0; step < back_to_back; ++step) {
      for (size_t i = 0; i < measured.size(); ++i) {
        const absl::StatusOr<double> ms =
            TimedStep(*measured[i].model, batch, measured[i].cache, measured[i].settings, /*greedy=*/true);
        if (!ms.ok()) {
          std::fprintf(stderr, "%s\n", std::string(ms.status().message()).c_str());
          return 1;
        }
        step_ms[i].push_back(*ms);
      }
    }
    for (int pass = 0; pass < 3; ++pass) bandwidth = std::max(bandwidth, ReadBandwidthGbPerSecond(read_buffer));
    std::printf("read bandwidth %.1f GB/s (best multi-threaded read of 2 GiB, before and after the steps)\n",
                bandwidth);
    for (size_t i = 0; i < measured.size(); ++i) {
      std::vector<double>& ms = step_ms[i];
      std::sort(ms.begin(), ms.end());
      const double limit_ms = measured[i].weight_bytes / (bandwidth * 1e9) * 1e3;
      std::printf(
          "%-16s %lld decode b=1 steps, in turns: median %.2f ms, best %.2f ms; weights' read limit %.2f ms: best "
          "%.1f%%, median %.1f%%\n",
          measured[i].label.c_str(), static_cast<long long>(back_to_back), ms[ms.size() / 2], ms.front(), limit_ms,
          limit_ms / ms.front() * 100, limit_ms / ms[ms.size() / 2] * 100);
    }
    if (profile) {
      for (Measured& m : measured) {
        if (!ProfileSteps(*m.model, batch, m.cache, 100, m.label + " decode b=1, back to back").ok()) return 1;
      }
    }
    return 0;
  }
  if (!contexts.empty()) {
    // Decode b=1 after each context, the packages and contexts taking turns in every run; best step of 15. As in
    // the full run, the best read over the run is the yardstick, and each step is also paired with a read of its
    // weights' bytes just before it.
    std::vector<std::vector<double>> best(measured.size(), std::vector<double>(contexts.size(), 1e9));
    std::vector<std::vector<std::vector<double>>> paired(measured.size(),
                                                         std::vector<std::vector<double>>(contexts.size()));
    for (int run = -3; run < 15; ++run) {
      bandwidth = std::max(bandwidth, ReadBandwidthGbPerSecond(read_buffer));
      for (size_t c = 0; c < contexts.size(); ++c) {
        const auto batch = MakeBatch(1, contexts[c], 0, kBlockSize, vocab);
        for (size_t i = 0; i < measured.size(); ++i) {
          const double moment_gbs = MomentReadGbPerSecond(read_buffer, measured[i].weight_bytes);
          const absl::StatusOr<double> step_ms =
              TimedStep(*measured[i].model, batch, measured[i].cache, measured[i].settings, /*greedy=*/true);
          if (!step_ms.ok()) {
            std::fprintf(stderr, "%s\n", std::string(step_ms.status().message()).c_str());
            return 1;
          }
          const double ms = *step_ms;
          if (run < 0) continue;
          best[i][c] = std::min(best[i][c], ms);
          paired[i][c].push_back(measured[i].weight_bytes / (ms * 1e6) / moment_gbs);
        }
      }
    }
    std::printf("read bandwidth %.1f GB/s (best multi-threaded read of 2 GiB, before every run)\n", bandwidth);
    for (size_t i = 0; i < measured.size(); ++i) {
      const double limit_ms = measured[i].weight_bytes / (bandwidth * 1e9) * 1e3;
      for (size_t c = 0; c < contexts.size(); ++c) {
        std::sort(paired[i][c].begin(), paired[i][c].end());
        std::printf(
            "%-10s decode b=1 after %6lld tokens: %8.2f ms (%.2fx the step after %lld); weights' read limit %.2f ms: "
            "%.1f%%, paired %.1f%%\n",
            measured[i].label.c_str(), static_cast<long long>(contexts[c]), best[i][c], best[i][c] / best[i][0],
            static_cast<long long>(contexts[0]), limit_ms, limit_ms / best[i][c] * 100,
            paired[i][c][paired[i][c].size() / 2] * 100);
      }
    }
    if (profile) {
      for (Measured& m : measured) {
        for (const int64_t context : contexts) {
          const auto batch = MakeBatch(1, context, 0, kBlockSize, vocab);
          const std::string title = absl::StrCat(m.label, " decode b=1 after ", context, " tokens");
          if (!ProfileSteps(*m.model, batch, m.cache, 15, title).ok()) return 1;
        }
      }
    }
    return 0;
  }
  for (const Shape shape :
       {Shape{"decode b=1", 1, 0}, Shape{"decode b=4", 4, 0}, Shape{"decode b=8", 8, 0}, Shape{"decode b=16", 16, 0},
        Shape{"decode b=32", 32, 0}, Shape{"prefill 512", 1, 512}, Shape{"prefill 2000", 1, 2000}}) {
    const auto batch = MakeBatch(shape.sequences, shape.prefill > 0 ? 0 : kContext, shape.prefill, kBlockSize, vocab);
    const int runs = shape.prefill > 0 ? 2 : 15;
    std::vector<std::array<double, 2>> best_ms(measured.size(), {1e9, 1e9});
    std::vector<std::vector<double>> paired(measured.size());
    std::vector<double> step_bytes(measured.size()), step_experts(measured.size());
    // The two variants alternate too, so a slow spell of this shared machine hits both alike.
    for (int run = -(shape.prefill > 0 ? 1 : 3); run < runs; ++run) {  // negative runs warm up
      for (size_t i = 0; i < measured.size(); ++i) {
        Measured& m = measured[i];
        // A read of as many bytes as the weights (up to the buffer's 2 GiB) right before the steps: the limit
        // at this moment.
        double moment_gbs = 0;
        if (shape.prefill == 0) {
          bandwidth = std::max(bandwidth, ReadBandwidthGbPerSecond(read_buffer));
          moment_gbs = MomentReadGbPerSecond(read_buffer, m.weight_bytes);
        }
        for (const bool greedy : {false, true}) {
          llmc::model::cpu::TakeActiveExpertCount();
          const absl::StatusOr<double> step_ms = TimedStep(*m.model, batch, m.cache, m.settings, greedy);
          if (!step_ms.ok()) {
            std::fprintf(stderr, "%s\n", std::string(step_ms.status().message()).c_str());
            return 1;
          }
          const double ms = *step_ms;
          const int64_t experts = llmc::model::cpu::TakeActiveExpertCount();
          const double bytes = static_cast<double>(m.streamed.dense + m.streamed.per_expert * experts);
          if (run < 0) continue;
          step_bytes[i] = bytes;
          step_experts[i] = static_cast<double>(experts);
          best_ms[i][greedy] = std::min(best_ms[i][greedy], ms);
          if (greedy) m.run_ms[shape.label].push_back(ms);
          if (greedy && moment_gbs > 0) paired[i].push_back(bytes / (ms * 1e6) / moment_gbs);
        }
      }
    }
    for (size_t i = 0; i < measured.size(); ++i) {
      std::sort(paired[i].begin(), paired[i].end());
      const double paired_fraction = paired[i].empty() ? 0 : paired[i][paired[i].size() / 2];
      measured[i].step_ms[shape.label] = best_ms[i][1];
      measured[i].rows.push_back({shape.label, shape.prefill > 0 ? shape.prefill : shape.sequences, best_ms[i][0],
                                  best_ms[i][1], paired_fraction, step_bytes[i], step_experts[i]});
    }
  }
  std::printf("read bandwidth %.1f GB/s (best multi-threaded read of 2 GiB, before and between the decode steps)\n",
              bandwidth);
  for (Measured& m : measured) {
    const char* label = m.label.c_str();
    // "full logits": every row's float32 logits (what rows with logprobs, penalties or top-p need);
    // "greedy": the step the engine runs for greedy rows, the LM head keeping each row's best logit in-pass.
    // "% of limit": the best step against the best read; "paired": the median, over the runs, of each step
    // against a read of the same number of bytes just before it (robust to a neighbour's noise).
    std::printf("%-10s %-14s %12s %10s %12s %12s %12s %8s\n", "dtype", "step", "full logits", "greedy", "tokens/s",
                "limit ms", "% of limit", "paired");
    for (const Row& row : m.rows) {
      const double limit_ms = row.bytes / (bandwidth * 1e9) * 1e3;
      std::printf("%-10s %-14s %12.2f %10.2f %12.1f %12.2f %11.1f%%", label, row.label, row.full_ms, row.greedy_ms,
                  row.tokens / row.greedy_ms * 1e3, limit_ms, limit_ms / row.greedy_ms * 100);
      if (row.paired_fraction > 0) std::printf(" %7.1f%%", row.paired_fraction * 100);
      // A mixture of experts: the experts the step read (over all sparse layers) and the bytes they make.
      if (m.streamed.per_expert > 0) std::printf("  %.0f experts, %.0f MB", row.active_experts, row.bytes / 1e6);
      std::printf("\n");
    }
    const double b1 = m.step_ms["decode b=1"];
    std::printf("%-10s step(b=8)/step(b=1) %.2f, step(b=16)/step(b=1) %.2f, step(b=32)/step(b=1) %.2f\n", label,
                m.step_ms["decode b=8"] / b1, m.step_ms["decode b=16"] / b1, m.step_ms["decode b=32"] / b1);
    std::printf("%-10s prefill 2000 runs at %.0f%% of the 512-token rate\n", label,
                (2000 / m.step_ms["prefill 2000"]) / (512 / m.step_ms["prefill 512"]) * 100);
    if (profile) {
      for (const Shape shape : {Shape{"decode b=1", 1, 0}, Shape{"decode b=8", 8, 0}, Shape{"decode b=32", 32, 0},
                                Shape{"prefill 512", 1, 512}}) {
        const auto batch =
            MakeBatch(shape.sequences, shape.prefill > 0 ? 0 : kContext, shape.prefill, kBlockSize, vocab);
        const int runs = shape.prefill > 0 ? 2 : 15;
        llmc::model::cpu::TakeActiveExpertCount();
        if (!ProfileSteps(*m.model, batch, m.cache, runs, m.label + " " + shape.label).ok()) return 1;
        if (m.streamed.per_expert > 0) {
          std::printf("  active experts per step: %.1f (of %lld in %zu sparse layers)\n",
                      static_cast<double>(llmc::model::cpu::TakeActiveExpertCount()) / runs,
                      static_cast<long long>(m.model->manifest().num_experts), m.model->manifest().moe_layers.size());
        }
      }
    }
    std::printf("%-10s weights %.0f MB (one row's step streams %.0f MB)\n", label,
                static_cast<double>(m.streamed.All(m.model->manifest())) / 1e6, m.weight_bytes / 1e6);
  }
  // How much faster each package's (greedy) step is than the first's: the median over the runs of the ratio
  // of the two steps taken back to back in that run (robust to the machine's slow spells), and the ratio of
  // the best steps.
  for (size_t i = 1; i < measured.size(); ++i) {
    std::printf("%s against %s, speed-up (step time of %s / step time of %s), median of runs (best of each):\n",
                measured[i].label.c_str(), measured[0].label.c_str(), measured[0].label.c_str(),
                measured[i].label.c_str());
    for (const Row& row : measured[i].rows) {
      const std::vector<double>& first = measured[0].run_ms[row.label];
      const std::vector<double>& other = measured[i].run_ms[row.label];
      std::vector<double> ratios;
      for (size_t run = 0; run < std::min(first.size(), other.size()); ++run) ratios.push_back(first[run] / other[run]);
      std::sort(ratios.begin(), ratios.end());
      const double median = ratios.empty() ? 0 : ratios[ratios.size() / 2];
      std::printf("  %-14s %.2fx (%.2fx)\n", row.label, median, measured[0].step_ms[row.label] / row.greedy_ms);
    }
  }
  return 0;
}
