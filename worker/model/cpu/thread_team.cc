#include "worker/model/cpu/thread_team.h"

#include <ATen/Parallel.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <chrono>
#include <limits>

namespace llmc::model::cpu {
namespace {

// How long an idle worker spins before it sleeps: longer than the gaps between the operators of one step,
// far shorter than the gap between steps of an idle engine.
constexpr std::chrono::microseconds kSpinTime{300};

thread_local bool in_job = false;

inline void Pause() {
#if defined(__x86_64__)
  __builtin_ia32_pause();
#endif
}

}  // namespace

void TeamMember::Barrier() {
  if (size_ > 1) team_->BarrierWait();
}

std::pair<int64_t, int64_t> ContiguousShare(int64_t count, int64_t index, int64_t size) {
  const int64_t base = count / size, larger = count % size;  // the first `larger` shares hold one more
  const int64_t begin = index * base + std::min(index, larger);
  return {begin, begin + base + (index < larger ? 1 : 0)};
}

std::pair<int64_t, int64_t> TeamMember::Share(int64_t count) const { return ContiguousShare(count, index_, size_); }

void TeamMember::ReadWhileWaiting(const c10::Storage& memory, const char* data, int64_t bytes) {
  if (index_ > 0 && index_ < static_cast<int>(team_->pending_reads_.size())) {
    team_->pending_reads_[index_] = {memory, data, bytes};
  }
}

WorkQueue::WorkQueue(int64_t count, int members) : shares_(std::max(1, members)) {
  // Both bounds must fit 32 bits; a job has at most a few hundred thousand items (panels, attention tiles).
  TORCH_CHECK(count >= 0 && count <= std::numeric_limits<int32_t>::max(), "WorkQueue: ", count,
              " items do not fit its 32-bit bounds");
  const int64_t size = static_cast<int64_t>(shares_.size());
  for (int64_t i = 0; i < size; ++i) {
    const auto [front, back] = ContiguousShare(count, i, size);
    shares_[i].bounds.store(Pack(front, back), std::memory_order_relaxed);
  }
}

std::pair<int64_t, int64_t> WorkQueue::Claim(const TeamMember& member, int64_t run) {
  run = std::max<int64_t>(run, 1);
  const int size = static_cast<int>(shares_.size());
  const int home = member.index() % size;
  for (int offset = 0; offset < size; ++offset) {
    std::atomic<uint64_t>& bounds = shares_[(home + offset) % size].bounds;
    uint64_t current = bounds.load(std::memory_order_relaxed);
    while (true) {
      const int64_t front = static_cast<int64_t>(current >> 32);
      const int64_t back = static_cast<int64_t>(current & 0xffffffffu);
      if (front >= back) break;
      // Runs shrink to half of what is left, so that the members' last runs, and the imbalance they leave at
      // the job's end, are short.
      const int64_t take = std::min(run, (back - front + 1) / 2);
      if (offset == 0) {
        const int64_t end = front + take;
        if (bounds.compare_exchange_weak(current, Pack(end, back), std::memory_order_acq_rel)) return {front, end};
      } else {
        const int64_t begin = back - take;
        if (bounds.compare_exchange_weak(current, Pack(front, begin), std::memory_order_acq_rel)) return {begin, back};
      }
    }
  }
  return {0, 0};
}

ThreadTeam& ThreadTeam::Get() {
  static ThreadTeam* team = new ThreadTeam();  // never destroyed: workers may outlive static destructors
  return *team;
}

ThreadTeam::~ThreadTeam() { Resize(1); }

void ThreadTeam::Resize(int size) {
  if (!workers_.empty()) {
    stopping_ = true;
    {
      std::lock_guard<std::mutex> lock(sleep_mutex_);
      generation_.fetch_add(1);
    }
    wake_.notify_all();
    for (auto& worker : workers_) worker.join();
    workers_.clear();
    stopping_ = false;
  }
  size_ = size;
  pending_reads_.assign(size, PendingRead{});
  // A worker must wait for the generation after this one, even if it starts running only after the next
  // job was posted.
  const uint64_t current = generation_.load();
  for (int index = 1; index < size; ++index) {
    workers_.emplace_back([this, index, current] { WorkerLoop(index, current); });
  }
}

void ThreadTeam::Run(const std::function<void(TeamMember&)>& job) {
  if (in_job) {
    TeamMember alone(0, 1, this);
    job(alone);
    return;
  }
  std::lock_guard<std::mutex> run_lock(run_mutex_);
  const int wanted = std::max(1, at::get_num_threads());
  if (wanted != size_) Resize(wanted);
  in_job = true;
  if (size_ > 1) {
    job_ = &job;
    unfinished_.store(size_ - 1, std::memory_order_relaxed);
    {
      std::lock_guard<std::mutex> lock(sleep_mutex_);
      generation_.fetch_add(1, std::memory_order_release);
    }
    if (sleepers_.load() > 0) wake_.notify_all();
  }
  TeamMember self(0, size_, this);
  job(self);
  while (unfinished_.load(std::memory_order_acquire) > 0) Pause();
  in_job = false;
}

void ThreadTeam::WorkerLoop(int index, uint64_t seen) {
  in_job = true;
  while (true) {
    const auto spin_until = std::chrono::steady_clock::now() + kSpinTime;
    int spins = 0;
    while (generation_.load(std::memory_order_acquire) == seen) {
      Pause();
      if (++spins % 256 == 0 && std::chrono::steady_clock::now() > spin_until) {
        std::unique_lock<std::mutex> lock(sleep_mutex_);
        sleepers_.fetch_add(1);
        wake_.wait(lock, [&] { return generation_.load() != seen; });
        sleepers_.fetch_sub(1);
      }
    }
    seen = generation_.load(std::memory_order_acquire);
    if (stopping_) return;
    TeamMember member(index, size_, this);
    (*job_)(member);
    unfinished_.fetch_sub(1, std::memory_order_release);
    ReadPending(index, seen);
  }
}

void ThreadTeam::ReadPending(int index, uint64_t seen) {
  PendingRead& pending = pending_reads_[index];
  if (pending.data == nullptr) return;
  const char* line = pending.data;
  const char* const end = line + pending.bytes;
  constexpr int kLinesBetweenChecks = 16;
  while (line < end && generation_.load(std::memory_order_relaxed) == seen) {
    for (int i = 0; i < kLinesBetweenChecks && line < end; ++i, line += 64) {
      // A load the compiler must keep: its value goes nowhere.
      asm volatile("" : : "r"(*reinterpret_cast<const volatile char*>(line)));
    }
  }
  if (line < end) {
    // The next job came first. Unless it hands out a read of its own, the rest follows it.
    pending.data = line;
    pending.bytes = end - line;
    return;
  }
  pending = PendingRead{};
}

void ThreadTeam::BarrierWait() {
  const uint64_t phase = barrier_phase_.load(std::memory_order_acquire);
  if (barrier_arrived_.fetch_add(1, std::memory_order_acq_rel) + 1 == size_) {
    barrier_arrived_.store(0, std::memory_order_relaxed);
    barrier_phase_.fetch_add(1, std::memory_order_release);
    return;
  }
  while (barrier_phase_.load(std::memory_order_acquire) == phase) Pause();
}

}  // namespace llmc::model::cpu
