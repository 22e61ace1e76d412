// The controller's pick path: WorkerRegistry::Pick per second for each dispatch policy, on one thread and
// on as many threads as the machine has (the gRPC server calls it concurrently), with 64 workers and
// requests of 64 prefix chunk hashes (8 KiB of input) from 500 prompt families. Prints figures; judges
// nothing.
//
//   llmc_pick_bench [seconds per measurement, default 2]
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/clock.h"
#include "controller/worker_registry.h"

namespace {

using llmc::controller::WorkerRegistry;

constexpr int kWorkers = 64;
constexpr int kFamilies = 500;
constexpr int kChunks = 64;
constexpr int kSharedChunks = 48;  // a family's system prompt and history; the rest is the request's own

std::unique_ptr<WorkerRegistry> MakeRegistry(const llmc::Clock& clock, const std::string& policy) {
  auto registry =
      std::make_unique<WorkerRegistry>(clock, absl::Hours(1), llmc::dispatch::MakeDispatchPolicy(policy, 1).value());
  for (int w = 0; w < kWorkers; ++w) {
    llmc::v1::RegisterWorkerRequest request;
    request.set_worker_id("worker-" + std::to_string(w));
    request.set_address("10.0.0." + std::to_string(w % 250 + 1) + ":21002");
    request.add_models()->set_name("m");
    request.mutable_load()->set_max_running(32);
    if (!registry->Register(request).ok()) std::exit(1);
  }
  return registry;
}

// Pick calls per second over `seconds`, from `threads` threads; heartbeats reset the pick counts every
// 10,000 picks as workers' reports would.
double PicksPerSecond(const std::string& policy, int threads, double seconds) {
  auto registry = MakeRegistry(llmc::Clock::Real(), policy);
  std::atomic<int64_t> picks{0};
  std::atomic<bool> stop{false};
  std::vector<std::thread> pickers;
  for (int t = 0; t < threads; ++t) {
    pickers.emplace_back([&, t] {
      std::mt19937_64 random(t + 1);
      std::vector<std::vector<uint64_t>> requests(256);
      for (auto& hashes : requests) {
        const uint64_t family = random() % kFamilies;
        for (int c = 0; c < kChunks; ++c) hashes.push_back(c < kSharedChunks ? family * 1000 + c : random());
      }
      int64_t local = 0;
      while (!stop.load(std::memory_order_relaxed)) {
        const auto& hashes = requests[local % requests.size()];
        if (!registry->Pick("m", {}, hashes).ok()) std::exit(1);
        if (++local % 10000 == 0) {
          for (int w = 0; w < kWorkers; ++w) {
            llmc::v1::HeartbeatRequest heartbeat;
            heartbeat.set_worker_id("worker-" + std::to_string(w));
            heartbeat.mutable_load()->set_max_running(32);
            (void)registry->Heartbeat(heartbeat);
          }
        }
      }
      picks += local;
    });
  }
  const absl::Time start = absl::Now();
  absl::SleepFor(absl::Seconds(seconds));
  stop = true;
  for (auto& picker : pickers) picker.join();
  return static_cast<double>(picks.load()) / absl::ToDoubleSeconds(absl::Now() - start);
}

}  // namespace

int main(int argc, char** argv) {
  // As in llmc-controller (common/main_support.h).
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  const double seconds = argc > 1 ? std::atof(argv[1]) : 2.0;
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  std::printf("%d workers, %d prefix chunks per request (%d shared within %d families), %d hardware threads\n",
              kWorkers, kChunks, kSharedChunks, kFamilies, cores);
  std::printf("%16s %14s %14s\n", "policy", "picks/s (1)", "picks/s (all)");
  for (const char* policy : {"lottery", "shortest_queue", "prefix_aware"}) {
    std::printf("%16s %14.0f %14.0f\n", policy, PicksPerSecond(policy, 1, seconds),
                PicksPerSecond(policy, cores, seconds));
    std::fflush(stdout);
  }
  return 0;
}
