// Decode speed with a JSON Schema constraint against the same requests unconstrained, at 1 and 16 concurrent
// requests, through the continuous-batching engine, in one run: the two kinds alternate in rounds so that
// drift in the machine's speed falls on both. Prints figures; judges nothing.
//
//   llmc_structured_bench <package-dir> [max_tokens] [rounds] [seconds per measurement]
#include <ATen/Parallel.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "worker/engine/engine.h"
#include "worker/engine/engine_observer.h"
#include "worker/service/constraint_compiler.h"

namespace {

using llmc::engine::Engine;

// An array of records: a realistic extraction schema whose output can run as long as the model likes.
constexpr char kSchema[] = R"({"type":"array","items":{"type":"object","properties":{
  "name":{"type":"string","maxLength":40},"id":{"type":"integer","minimum":0},
  "tags":{"type":"array","items":{"type":"string"},"maxItems":4},"active":{"type":"boolean"}},
  "required":["name","id","tags","active"],"additionalProperties":false}})";

// Tokens delivered to any request, for the rate over a window.
std::atomic<int64_t> delivered_tokens{0};

class CountingSink : public llmc::engine::GenerationSink {
 public:
  void OnResponse(llmc::v1::GenerateResponse response) override {
    for (const auto& delta : response.deltas()) {
      tokens_ += delta.token_ids_size();
      delivered_tokens += delta.token_ids_size();
    }
  }
  void OnDone(absl::Status status) override {
    ok_ = status.ok();
    if (!ok_) std::fprintf(stderr, "request failed: %s\n", status.ToString().c_str());
    done_.Notify();
  }
  bool Wait() { return done_.WaitForNotificationWithTimeout(absl::Minutes(30)) && ok_; }
  bool done() const { return done_.HasBeenNotified(); }
  int64_t tokens() const { return tokens_.load(); }

 private:
  std::atomic<int64_t> tokens_{0};
  bool ok_ = false;
  absl::Notification done_;
};

// Decode-only steps: their count and wall time, and the time spent filling grammar masks.
class StepTimer : public llmc::engine::EngineObserver {
 public:
  void OnStep(const llmc::engine::StepStats& step) override {
    if (step.num_prefill_tokens > 0) return;
    absl::MutexLock lock(&mu_);
    ++steps_;
    rows_ += step.num_decode_tokens;
    seconds_ += absl::ToDoubleSeconds(step.step_time);
  }
  void OnGrammarMask(absl::Duration fill_time) override {
    absl::MutexLock lock(&mu_);
    mask_seconds_ += absl::ToDoubleSeconds(fill_time);
  }
  void Reset() {
    absl::MutexLock lock(&mu_);
    steps_ = rows_ = 0;
    seconds_ = mask_seconds_ = 0;
  }
  double DecodeTokensPerSecond() const {
    absl::MutexLock lock(&mu_);
    return seconds_ > 0 ? rows_ / seconds_ : 0;
  }
  double StepMs() const {
    absl::MutexLock lock(&mu_);
    return steps_ > 0 ? seconds_ / steps_ * 1e3 : 0;
  }
  double MaskMsPerStep() const {
    absl::MutexLock lock(&mu_);
    return steps_ > 0 ? mask_seconds_ / steps_ * 1e3 : 0;
  }

 private:
  mutable absl::Mutex mu_;
  int64_t steps_ = 0, rows_ = 0;
  double seconds_ = 0, mask_seconds_ = 0;
};

struct Figures {
  double decode_tokens_per_second = 0;  // rows of decode-only steps per second of those steps
  double tokens_per_second = 0;         // tokens delivered per second of the window, prefills included
  double step_ms = 0, mask_ms = 0, tokens_per_request = 0;
};

llmc::engine::GenerationRequest MakeRequest(const llmc::engine::OutputConstraint* constraint, uint32_t max_tokens,
                                            int serial) {
  llmc::engine::GenerationRequest request;
  // Distinct prompts per request: no prefix is shared.
  for (int64_t t = 0; t < 64; ++t) {
    request.prompt_token_ids.push_back(static_cast<int32_t>((serial * int64_t{7919} + t * 104729) % 150000 + 10));
  }
  request.sampling.temperature = 1.0f;
  request.sampling.seed = static_cast<uint64_t>(serial);
  request.sampling.max_tokens = max_tokens;
  request.sampling.ignore_eos = true;
  if (constraint != nullptr) {
    request.constraint = *constraint;
    request.sampling.constrained = true;
  }
  return request;
}

// `concurrent` requests kept in flight for `duration` (a finished one is replaced at once, since a schema's
// answer may end before max_tokens): tokens delivered per second of the window, prefills included, and the
// mean decode-only step.
Figures Run(Engine& engine, StepTimer& timer, const llmc::engine::OutputConstraint* constraint, int concurrent,
            uint32_t max_tokens, absl::Duration duration, int& serial) {
  std::vector<std::shared_ptr<CountingSink>> sinks;
  const auto submit = [&] {
    sinks.push_back(std::make_shared<CountingSink>());
    if (absl::StatusOr<uint64_t> id = engine.Submit(MakeRequest(constraint, max_tokens, ++serial), sinks.back());
        !id.ok()) {
      std::fprintf(stderr, "refused: %s\n", id.status().ToString().c_str());
      std::exit(1);
    }
  };
  for (int r = 0; r < concurrent; ++r) submit();
  timer.Reset();
  const int64_t delivered_before = delivered_tokens.load();
  const absl::Time start = absl::Now();
  const absl::Time end = start + duration;
  int64_t finished = 0, finished_tokens = 0;
  while (absl::Now() < end) {
    int replace = 0;
    for (auto& sink : sinks) {
      if (sink == nullptr || !sink->done()) continue;
      ++finished;
      finished_tokens += sink->tokens();
      sink = nullptr;
      ++replace;
    }
    for (int r = 0; r < replace; ++r) submit();
    absl::SleepFor(absl::Milliseconds(1));
  }
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
  const Figures figures{timer.DecodeTokensPerSecond(),
                        static_cast<double>(delivered_tokens.load() - delivered_before) / seconds, timer.StepMs(),
                        timer.MaskMsPerStep(), finished > 0 ? static_cast<double>(finished_tokens) / finished : 0};
  for (auto& sink : sinks) {
    if (sink != nullptr && !sink->Wait()) std::exit(1);
  }
  return figures;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s <package-dir> [max_tokens] [rounds]\n", argv[0]);
    return 2;
  }
  const char* threads = std::getenv("LLMC_THREADS");
  at::set_num_threads(threads ? std::atoi(threads) : static_cast<int>(std::thread::hardware_concurrency()));
  const std::string package = argv[1];
  const uint32_t max_tokens = argc > 2 ? static_cast<uint32_t>(std::atoi(argv[2])) : 64;
  const int rounds = argc > 3 ? std::atoi(argv[3]) : 3;
  const absl::Duration duration = absl::Seconds(argc > 4 ? std::atoi(argv[4]) : 8);
  auto tokenizer = llmc::tokenizer::Tokenizer::FromFile(package + "/tokenizer.json");
  if (!tokenizer.ok()) return 1;
  auto model = llmc::model::LoadedModel::Load(package, {"cpu", ""});
  if (!model.ok()) return 1;
  const std::vector<int32_t> eos = (*model)->manifest().eos_token_ids;
  llmc::worker::ConstraintCompiler compiler(**tokenizer, eos);
  llmc::v1::OutputConstraint schema;
  schema.set_json_schema(kSchema);
  const absl::Time compile_start = absl::Now();
  absl::StatusOr<llmc::engine::OutputConstraint> constraint = compiler.CompileNow(schema);
  if (!constraint.ok()) {
    std::fprintf(stderr, "%s\n", constraint.status().ToString().c_str());
    return 1;
  }
  const double compile_ms = absl::ToDoubleMilliseconds(absl::Now() - compile_start);
  llmc::engine::EngineOptions options;
  options.kv_cache_bytes = 2LL << 30;
  options.max_running = 32;
  options.max_num_batched_tokens = 512;
  options.max_model_len = 4096;
  StepTimer timer;
  auto engine = Engine::Create(std::move(*model), **tokenizer, options, &timer);
  if (!engine.ok() || !(*engine)->Start().ok()) return 1;
  std::printf(
      "package %s, up to %u output tokens per request (sampled, T=1), 64-token prompts, %d threads, %d rounds of "
      "%s each way\n",
      package.c_str(), max_tokens, at::get_num_threads(), rounds, absl::FormatDuration(duration).c_str());
  std::printf("schema compiled in %.1f ms (vocabulary index included)\n", compile_ms);
  std::printf(
      "decode tok/s: rows of decode-only steps per second of those steps; window tok/s: tokens delivered\n"
      "per second, prefills of the replacing requests included (schema answers end sooner, so they pay more)\n");
  std::printf("%11s %13s %13s %7s %13s %13s %7s %10s %10s %12s %9s\n", "concurrent", "plain decode", "schema decode",
              "ratio", "plain window", "schema window", "ratio", "plain ms", "schema ms", "mask ms/step", "tok/req");
  for (const int concurrent : {1, 16}) {
    Figures plain_total, schema_total;
    int serial = concurrent * 100000;
    // A warm-up of each fills the caches and the mask tables, as a served schema would have them.
    Run(**engine, timer, nullptr, concurrent, max_tokens, duration / 4, serial);
    Run(**engine, timer, &*constraint, concurrent, max_tokens, duration / 4, serial);
    for (int round = 1; round <= rounds; ++round) {
      const Figures plain = Run(**engine, timer, nullptr, concurrent, max_tokens, duration, serial);
      const Figures schema_figures = Run(**engine, timer, &*constraint, concurrent, max_tokens, duration, serial);
      plain_total.decode_tokens_per_second += plain.decode_tokens_per_second / rounds;
      schema_total.decode_tokens_per_second += schema_figures.decode_tokens_per_second / rounds;
      plain_total.tokens_per_second += plain.tokens_per_second / rounds;
      plain_total.step_ms += plain.step_ms / rounds;
      schema_total.tokens_per_second += schema_figures.tokens_per_second / rounds;
      schema_total.step_ms += schema_figures.step_ms / rounds;
      schema_total.mask_ms += schema_figures.mask_ms / rounds;
      schema_total.tokens_per_request += schema_figures.tokens_per_request / rounds;
    }
    std::printf("%11d %13.1f %13.1f %6.3fx %13.1f %13.1f %6.3fx %10.2f %10.2f %12.3f %9.1f\n", concurrent,
                plain_total.decode_tokens_per_second, schema_total.decode_tokens_per_second,
                schema_total.decode_tokens_per_second / plain_total.decode_tokens_per_second,
                plain_total.tokens_per_second, schema_total.tokens_per_second,
                schema_total.tokens_per_second / plain_total.tokens_per_second, plain_total.step_ms,
                schema_total.step_ms, schema_total.mask_ms, schema_total.tokens_per_request);
    std::fflush(stdout);
  }
  (*engine)->Stop();
  return 0;
}
