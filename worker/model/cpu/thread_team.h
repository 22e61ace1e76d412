#ifndef LLMC_WORKER_MODEL_CPU_THREAD_TEAM_H_
#define LLMC_WORKER_MODEL_CPU_THREAD_TEAM_H_

#include <c10/core/Storage.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

namespace llmc::model::cpu {

// Share `index` of `size` contiguous shares of 0..count, as even as they can be, the larger ones first: fewer
// items than members go to the lowest members, so a single item (one decode row, one token) goes to member 0,
// the caller's thread, which is already running, and not to a worker that may still be waking up.
std::pair<int64_t, int64_t> ContiguousShare(int64_t count, int64_t index, int64_t size);

// What a job sees: its member index, the team size, and a barrier across the members.
class TeamMember {
 public:
  int index() const { return index_; }
  int size() const { return size_; }
  // Returns once every member of the job has called it (as often).
  void Barrier();
  // This member's share [begin, end) of 0..count (ContiguousShare).
  std::pair<int64_t, int64_t> Share(int64_t count) const;
  // On a worker (not the calling thread, which has the next operator to start): once this job is done, read
  // [data, data + bytes) into this core's caches while waiting for the next job, stopping as soon as it comes.
  // The last call of a job counts; `memory` is kept alive until the read ends.
  void ReadWhileWaiting(const c10::Storage& memory, const char* data, int64_t bytes);

 private:
  friend class ThreadTeam;
  TeamMember(int index, int size, class ThreadTeam* team) : index_(index), size_(size), team_(team) {}
  int index_;
  int size_;
  class ThreadTeam* team_;
};

// Work items 0..count-1 for one job. Each member owns a contiguous share (ContiguousShare)
// and takes it in runs from the front, so a member's weight reads stream through adjacent memory, which the
// hardware prefetchers follow (runs handed out in turn broke every member's stream at each run: on AMD Zen 4
// the projections of a decode step read 12-15 % slower when the machine had bandwidth to spare). A member
// whose share is done takes runs from the back of the others' shares, so one that the OS preempts (other
// processes share these cores) leaves its remaining items to the others instead of holding everyone at the
// next barrier. Items come out in no particular order across runs.
class WorkQueue {
 public:
  // `members`: the team size the job is expected to run with; any other size still gets every item once.
  WorkQueue(int64_t count, int members);
  // The next run [begin, end) for `member`: at most `run` items and at most half (rounded up) of what is left
  // in the share it comes from; empty once all are taken.
  std::pair<int64_t, int64_t> Claim(const TeamMember& member, int64_t run);

 private:
  // front in the high half, back in the low half, so that owner and thieves agree through one CAS.
  struct alignas(64) Range {
    std::atomic<uint64_t> bounds{0};
  };
  static uint64_t Pack(int64_t front, int64_t back) {
    return (static_cast<uint64_t>(front) << 32) | static_cast<uint64_t>(back);
  }
  std::vector<Range> shares_;
};

// The one persistent team the CPU kernels run on: the calling thread plus size - 1 workers that spin
// briefly between jobs (a decode step is a quick succession of them) and then sleep. Its size follows
// at::get_num_threads(), so --num_threads is honoured exactly. Unlike OpenMP, whose thread pool belongs to
// the thread that first used it, any thread may call Run (one at a time): the model may be loaded on one
// thread and stepped on another without a second team competing for the cores.
class ThreadTeam {
 public:
  static ThreadTeam& Get();

  // Runs job(member) on every member and returns when all have finished. The job must not throw. A call
  // from inside a job runs the nested job on that thread alone.
  void Run(const std::function<void(TeamMember&)>& job);

  ~ThreadTeam();

 private:
  friend class TeamMember;
  ThreadTeam() = default;
  void Resize(int size);
  void WorkerLoop(int index, uint64_t seen);
  void BarrierWait();
  // Reads the member's pending span (ReadWhileWaiting) until the generation moves on from `seen`.
  void ReadPending(int index, uint64_t seen);

  struct PendingRead {
    c10::Storage memory;
    const char* data = nullptr;
    int64_t bytes = 0;
  };

  std::mutex run_mutex_;  // one job at a time
  std::vector<std::thread> workers_;
  std::vector<PendingRead> pending_reads_;  // by member index; each written and read by its own worker only
  int size_ = 1;
  const std::function<void(TeamMember&)>* job_ = nullptr;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> unfinished_{0};
  std::atomic<bool> stopping_{false};
  std::mutex sleep_mutex_;
  std::condition_variable wake_;
  std::atomic<int> sleepers_{0};
  // Barrier: arrivals counted, the last one flips the phase.
  std::atomic<int> barrier_arrived_{0};
  std::atomic<uint64_t> barrier_phase_{0};
};

}  // namespace llmc::model::cpu

#endif  // LLMC_WORKER_MODEL_CPU_THREAD_TEAM_H_
