#include "tools/sim/simulation.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <queue>
#include <random>
#include <vector>

#include "common/prefix_hash.h"
#include "dispatch/dispatch_policy.h"
#include "dispatch/registered_worker.h"
#include "tools/sim/sim_worker.h"

namespace llmc::sim {
namespace {

enum class EventKind { kConversation, kTurn, kStep, kHeartbeat };

struct Event {
  double time_s;
  EventKind kind;
  int64_t index;  // the request (kTurn) or the worker (kStep)
  bool operator>(const Event& other) const { return time_s > other.time_s; }
};

double Percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const double rank = p / 100.0 * static_cast<double>(values.size() - 1);
  const size_t low = static_cast<size_t>(std::floor(rank));
  const size_t high = std::min(low + 1, values.size() - 1);
  return values[low] + (values[high] - values[low]) * (rank - static_cast<double>(low));
}

uint64_t BlockId(uint64_t owner, uint64_t kind, int64_t index) {
  return MixBits(MixBits(owner * 0x9e3779b97f4a7c15ULL + kind) ^ static_cast<uint64_t>(index));
}

class Run {
 public:
  Run(const SimConfig& config, std::unique_ptr<dispatch::DispatchPolicy> policy)
      : config_(config), policy_(std::move(policy)), random_(config.seed) {
    const Workload& w = config.workload;
    double total = 0;
    for (int64_t f = 1; f <= w.families; ++f) {
      total += 1.0 / std::pow(static_cast<double>(f), w.zipf_s);
      family_cdf_.push_back(total);
    }
    for (double& value : family_cdf_) value /= total;
    workers_.reserve(static_cast<size_t>(config.workers));
    views_.reserve(static_cast<size_t>(config.workers));
    for (int64_t i = 0; i < config.workers; ++i) {
      workers_.emplace_back(config.limits, config.step);
      dispatch::RegisteredWorker view;
      view.worker_id = "worker-" + std::to_string(i);
      view.load.set_max_running(static_cast<uint32_t>(config.limits.max_running));
      views_.push_back(std::move(view));
    }
    for (const auto& view : views_) candidates_.push_back(&view);
    stepping_.assign(static_cast<size_t>(config.workers), false);
    request_rate_ = config.load * CapacityRequestsPerSecond(config);
  }

  SimResult Go() {
    Schedule({NextConversationGap(), EventKind::kConversation, 0});
    Schedule({config_.heartbeat_s, EventKind::kHeartbeat, 0});
    while (!events_.empty() && events_.top().time_s <= config_.duration_s) {
      const Event event = events_.top();
      events_.pop();
      now_ = event.time_s;
      switch (event.kind) {
        case EventKind::kConversation:
          StartConversation();
          Schedule({now_ + NextConversationGap(), EventKind::kConversation, 0});
          break;
        case EventKind::kTurn:
          Dispatch(event.index);
          break;
        case EventKind::kStep:
          RunStep(event.index);
          break;
        case EventKind::kHeartbeat:
          Heartbeat();
          Schedule({now_ + config_.heartbeat_s, EventKind::kHeartbeat, 0});
          break;
      }
    }
    return Measure();
  }

 private:
  void Schedule(const Event& event) { events_.push(event); }
  // Simulated time as the dispatch policies read it (heartbeats, picks).
  absl::Time Now() const { return absl::UnixEpoch() + absl::Seconds(now_); }

  double NextConversationGap() {
    return std::exponential_distribution<double>(request_rate_ / static_cast<double>(config_.workload.turns))(random_);
  }

  // Turn `turn` of `conversation`: its prompt is the system prompt and every earlier turn.
  int64_t NewRequest(int64_t conversation, int64_t family, int64_t turn) {
    const Workload& w = config_.workload;
    SimRequest& request = requests_.emplace_back();
    request.conversation = conversation;
    request.family = family;
    request.turn = turn;
    request.prompt_tokens = w.system_tokens + turn * (w.user_tokens + w.output_tokens) + w.user_tokens;
    request.output_tokens = w.output_tokens;
    request.arrival_s = -1;  // set when dispatched
    const int64_t block_size = config_.limits.block_size;
    const int64_t system_blocks = w.system_tokens / block_size;
    const int64_t blocks = (request.prompt_tokens + request.output_tokens) / block_size;
    for (int64_t b = 0; b < blocks; ++b) {
      request.blocks.push_back(b < system_blocks ? BlockId(static_cast<uint64_t>(family), 1, b)
                                                 : BlockId(static_cast<uint64_t>(conversation), 2, b));
    }
    return static_cast<int64_t>(requests_.size()) - 1;
  }

  void StartConversation() {
    const double u = std::uniform_real_distribution<double>(0, 1)(random_);
    const int64_t family = std::lower_bound(family_cdf_.begin(), family_cdf_.end(), u) - family_cdf_.begin();
    Dispatch(NewRequest(next_conversation_++, family, 0));
  }

  void Dispatch(int64_t index) {
    SimRequest& request = requests_[static_cast<size_t>(index)];
    request.arrival_s = now_;
    const int64_t prompt_blocks = request.prompt_tokens / config_.limits.block_size;
    const absl::Span<const uint64_t> hashes(request.blocks.data(), static_cast<size_t>(prompt_blocks));
    const size_t chosen = policy_->Choose(candidates_, dispatch::PickRequest{hashes, Now()});
    ++views_[chosen].picks_since_heartbeat;
    workers_[chosen].Enqueue(&request);
    if (!stepping_[chosen]) {
      stepping_[chosen] = true;
      Schedule({now_, EventKind::kStep, static_cast<int64_t>(chosen)});
    }
  }

  void RunStep(int64_t worker) {
    finished_.clear();
    const double duration = workers_[static_cast<size_t>(worker)].Step(now_, finished_);
    for (SimRequest* request : finished_) {
      if (request->turn + 1 >= config_.workload.turns) continue;
      const int64_t next = NewRequest(request->conversation, request->family, request->turn + 1);
      const double think = std::exponential_distribution<double>(1.0 / config_.workload.think_s)(random_);
      Schedule({request->done_s + think, EventKind::kTurn, next});
    }
    if (workers_[static_cast<size_t>(worker)].idle()) {
      stepping_[static_cast<size_t>(worker)] = false;
    } else {
      Schedule({now_ + duration, EventKind::kStep, worker});
    }
  }

  void Heartbeat() {
    for (size_t i = 0; i < workers_.size(); ++i) {
      views_[i].load.set_num_waiting(static_cast<uint32_t>(workers_[i].num_waiting()));
      views_[i].load.set_num_running(static_cast<uint32_t>(workers_[i].num_running()));
      views_[i].load.set_kv_cache_usage(static_cast<float>(workers_[i].kv_usage()));
      views_[i].load.set_pending_prefill_tokens(static_cast<uint64_t>(workers_[i].pending_prefill_tokens()));
      views_[i].load.set_prefill_tokens_per_second(static_cast<float>(workers_[i].prefill_tokens_per_second()));
      views_[i].picks_since_heartbeat = 0;
      views_[i].last_heartbeat = Now();
      ++views_[i].heartbeats;
    }
  }

  SimResult Measure() const {
    SimResult result;
    result.request_rate = request_rate_;
    std::vector<double> ttft, tpot, e2e;
    int64_t output_tokens = 0, prompt_tokens = 0, cached_tokens = 0;
    for (const SimRequest& request : requests_) {
      // Warm-up, never dispatched (-1), or too close to the end to be answered.
      if (request.arrival_s < config_.warmup_s || request.arrival_s > config_.duration_s - config_.drain_s) continue;
      ++result.measured;
      if (request.first_token_s < 0) {
        ++result.unanswered;
        continue;
      }
      ttft.push_back((request.first_token_s - request.arrival_s) * 1e3);
      prompt_tokens += request.prompt_tokens;
      cached_tokens += request.cached_tokens;
      if (request.done_s >= 0) {
        output_tokens += request.output_tokens;
        e2e.push_back((request.done_s - request.arrival_s) * 1e3);
        if (request.output_tokens > 1) {
          tpot.push_back((request.done_s - request.first_token_s) * 1e3 /
                         static_cast<double>(request.output_tokens - 1));
        }
      }
    }
    result.ttft_p50_ms = Percentile(ttft, 50);
    result.ttft_p99_ms = Percentile(ttft, 99);
    result.tpot_p50_ms = Percentile(tpot, 50);
    result.tpot_p99_ms = Percentile(tpot, 99);
    result.e2e_p50_ms = Percentile(e2e, 50);
    result.e2e_p99_ms = Percentile(e2e, 99);
    result.output_tokens_per_s =
        static_cast<double>(output_tokens) / (config_.duration_s - config_.drain_s - config_.warmup_s);
    result.cached_fraction = prompt_tokens > 0 ? static_cast<double>(cached_tokens) / prompt_tokens : 0;
    return result;
  }

  const SimConfig& config_;
  std::unique_ptr<dispatch::DispatchPolicy> policy_;
  std::mt19937_64 random_;
  std::vector<double> family_cdf_;
  std::vector<SimWorker> workers_;
  std::vector<dispatch::RegisteredWorker> views_;
  std::vector<const dispatch::RegisteredWorker*> candidates_;
  std::vector<bool> stepping_;
  std::deque<SimRequest> requests_;
  std::vector<SimRequest*> finished_;
  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> events_;
  double request_rate_ = 0;
  double now_ = 0;
  int64_t next_conversation_ = 0;
};

}  // namespace

double CapacityRequestsPerSecond(const SimConfig& config) {
  const Workload& w = config.workload;
  const double mean_prompt =
      static_cast<double>(w.system_tokens + w.user_tokens) +
      static_cast<double>(w.turns - 1) / 2.0 * static_cast<double>(w.user_tokens + w.output_tokens);
  const double batch = static_cast<double>(config.limits.max_running);
  const double prefill_s = mean_prompt * config.step.per_prefill_token_ms / config.step.speedup / 1000.0;
  const double decode_s =
      static_cast<double>(w.output_tokens) * config.step.StepSeconds(static_cast<int64_t>(batch), 0) / batch;
  return static_cast<double>(config.workers) / (prefill_s + decode_s);
}

absl::StatusOr<SimResult> Simulate(const SimConfig& config, const std::string& policy) {
  dispatch::PrefixAwareWeights weights = config.weights;
  weights.tokens_per_hash = static_cast<double>(config.limits.block_size);  // the simulation hashes blocks
  auto made = dispatch::MakeDispatchPolicy(policy, config.seed, weights);
  if (!made.ok()) return made.status();
  Run run(config, *std::move(made));
  return run.Go();
}

}  // namespace llmc::sim
