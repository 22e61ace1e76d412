#include "tests/bench/step_profiler.h"

#include <ATen/record_function.h>

#include <algorithm>
#include <cstdio>
#include <thread>
#include <vector>

namespace llmc::bench {
namespace {

using Clock = std::chrono::steady_clock;

// RecordFunction callbacks are plain function pointers, so the profile lives here; one profiler at a time.
struct ProfileState {
  bool active = false;
  std::thread::id thread;
  int depth = 0;
  Clock::time_point op_start;
  std::string segment = "embed";
  std::map<std::string, StepProfiler::Totals> by_op;
  std::map<std::string, StepProfiler::Totals> by_segment;
  std::vector<std::string> segment_order;
};

ProfileState& State() {
  static ProfileState state;
  return state;
}

void EnterSegment(ProfileState& state, std::string segment) {
  if (segment == state.segment) return;
  state.segment = std::move(segment);
  if (std::find(state.segment_order.begin(), state.segment_order.end(), state.segment) == state.segment_order.end()) {
    state.segment_order.push_back(state.segment);
  }
}

// The graph selects kv_cache[layer] (a 6-d tensor) as each layer begins, and index_select's the rows that need
// logits before the final norm and the head.
void UpdateSegment(ProfileState& state, const at::RecordFunction& fn) {
  const std::string name = fn.name();
  if (name == "aten::index_select") {
    EnterSegment(state, "head");
    return;
  }
  if (name != "aten::select") return;
  const auto inputs = fn.inputs();
  if (inputs.size() >= 3 && inputs[0].isTensor() && inputs[0].toTensor().dim() == 6 && inputs[2].isInt()) {
    char label[32];
    std::snprintf(label, sizeof(label), "layer %02lld", static_cast<long long>(inputs[2].toInt()));
    EnterSegment(state, label);
  }
}

std::unique_ptr<at::ObserverContext> OnOpStart(const at::RecordFunction& fn) {
  ProfileState& state = State();
  if (!state.active || std::this_thread::get_id() != state.thread) return nullptr;
  if (state.depth++ == 0) {
    UpdateSegment(state, fn);
    state.op_start = Clock::now();
  }
  return nullptr;
}

void OnOpEnd(const at::RecordFunction& fn, at::ObserverContext*) {
  ProfileState& state = State();
  if (!state.active || std::this_thread::get_id() != state.thread) return;
  if (--state.depth != 0) return;
  const double seconds = std::chrono::duration<double>(Clock::now() - state.op_start).count();
  auto& op = state.by_op[fn.name()];
  op.seconds += seconds;
  ++op.calls;
  auto& segment = state.by_segment[state.segment];
  segment.seconds += seconds;
  ++segment.calls;
}

}  // namespace

StepProfiler::StepProfiler() {
  ProfileState& state = State();
  state = ProfileState{};
  state.segment_order = {"embed"};
  callback_handle_ = at::addGlobalCallback(
      at::RecordFunctionCallback(&OnOpStart, &OnOpEnd).needsInputs(true).scopes({at::RecordScope::FUNCTION}));
}

StepProfiler::~StepProfiler() {
  at::removeCallback(callback_handle_);
  State().active = false;
}

void StepProfiler::Begin() {
  ProfileState& state = State();
  state.thread = std::this_thread::get_id();
  state.depth = 0;
  state.segment = "embed";
  state.active = true;
  step_start_ = Clock::now();
}

void StepProfiler::End() {
  wall_seconds_ += std::chrono::duration<double>(Clock::now() - step_start_).count();
  ++steps_;
  State().active = false;
}

void StepProfiler::Print(const std::string& title) const {
  const ProfileState& state = State();
  if (steps_ == 0) return;
  const double per_step_ms = wall_seconds_ / steps_ * 1e3;
  double ops_ms = 0;
  std::vector<std::pair<std::string, Totals>> ops(state.by_op.begin(), state.by_op.end());
  std::sort(ops.begin(), ops.end(), [](const auto& a, const auto& b) { return a.second.seconds > b.second.seconds; });
  std::printf("\n## %s: %.2f ms per step (%d steps)\n\n", title.c_str(), per_step_ms, steps_);
  std::printf("| operator | calls/step | ms/step | %% of step |\n|---|---:|---:|---:|\n");
  double listed_ms = 0;
  for (const auto& [name, totals] : ops) {
    const double ms = totals.seconds / steps_ * 1e3;
    ops_ms += ms;
    if (ms < 0.005 * per_step_ms && ops.size() > 12) continue;  // the long tail, summed below
    listed_ms += ms;
    std::printf("| %s | %.0f | %.3f | %.1f |\n", name.c_str(), static_cast<double>(totals.calls) / steps_, ms,
                ms / per_step_ms * 100);
  }
  if (ops_ms - listed_ms > 0) {
    std::printf("| (other operators, each < 0.5 %%) | | %.3f | %.1f |\n", ops_ms - listed_ms,
                (ops_ms - listed_ms) / per_step_ms * 100);
  }
  int64_t total_calls = 0;
  for (const auto& [name, totals] : ops) total_calls += totals.calls;
  std::printf("| **all operators** | %.0f | %.3f | %.1f |\n", static_cast<double>(total_calls) / steps_, ops_ms,
              ops_ms / per_step_ms * 100);
  std::printf("| interpreter and glue (step − operators) | | %.3f | %.1f |\n\n", per_step_ms - ops_ms,
              (per_step_ms - ops_ms) / per_step_ms * 100);

  std::printf("| segment | ops/step | ms/step | %% of step |\n|---|---:|---:|---:|\n");
  for (const auto& segment : state.segment_order) {
    const auto found = state.by_segment.find(segment);
    if (found == state.by_segment.end()) continue;
    const double ms = found->second.seconds / steps_ * 1e3;
    std::printf("| %s | %.0f | %.3f | %.1f |\n", segment.c_str(), static_cast<double>(found->second.calls) / steps_, ms,
                ms / per_step_ms * 100);
  }
}

}  // namespace llmc::bench
