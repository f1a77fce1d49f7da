// A fixed-size pool of worker threads for data-parallel kernel loops.
//
// Threads are created once in the constructor and joined in the destructor.
// ParallelFor(n, fn) runs fn(i) for every i in [0, n) on the workers and the
// calling thread, and returns when all calls finished. It allocates nothing
// and creates no thread per call.
//
// Design: a forward pass issues a few hundred short parallel sections per
// token, so waking workers through a condition variable each time (tens of
// microseconds) would cost a large share of a decode step. Workers instead
// spin on an atomic generation counter for `spin_us` after each job, and only
// then sleep on a condition variable; the caller notifies only when someone
// sleeps. Indices are handed out one at a time from an atomic word, so a
// descheduled thread (a shared machine) delays only the items it holds.
//
// A job ends when all its items are done, not when every worker has looked
// at it: a worker that was descheduled (or asleep) while the others ran all
// the items is not waited for. Items are claimed by compare-and-swap on one
// word holding the next index and the job's size, so a worker that wakes
// late can only claim an item of the job that is current at that moment
// (and then runs that job's fn), never an item of a finished one. Under a
// daemon whose gRPC and client threads share the cores with the pool, the
// caller waited ~0.1 ms for such a worker in most decode steps.
//
// Only one ParallelFor may run at a time (one engine thread drives the pool);
// calls from several threads at once are serialized by an internal mutex. fn
// must not call ParallelFor on the same pool.
#ifndef BRAID_KERNELS_CPU_THREAD_POOL_H_
#define BRAID_KERNELS_CPU_THREAD_POOL_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/functional/function_ref.h"

namespace braid::kernels::cpu {

class ThreadPool {
 public:
  // num_threads counts the calling thread: num_threads - 1 workers are started.
  // num_threads <= 0 means std::thread::hardware_concurrency(). Idle workers
  // spin for spin_us microseconds before they sleep (0: sleep at once).
  explicit ThreadPool(int num_threads, int spin_us = 200);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return static_cast<int>(workers_.size()) + 1; }

  void ParallelFor(int64_t n, absl::FunctionRef<void(int64_t)> fn);

  // fn(u0, u1, share_end) over [0, units) in runs [u0, u1) of at most
  // `chunk` units: each thread takes runs from the front of its own share (an
  // equal, contiguous part of the range), then from the back of the others'
  // shares, so a thread that falls behind (the OS, the memory system) is
  // relieved of all but the run it holds, and each thread's runs stay in
  // order. share_end: for a run from the front of a share, where that share
  // ends ([u1, share_end) is what this thread likely takes next, e.g. to
  // prefetch); u1 for a run from the back. Returns when every run is done;
  // fn must not call the pool.
  void ParallelRanges(int64_t units, int64_t chunk,
                      absl::FunctionRef<void(int64_t, int64_t, int64_t)> fn);

  // Runs fn once on each of the num_threads() threads (the caller's
  // included), for per-thread state such as thread_local scratch; returns
  // when every call finished.
  void RunOnEachThread(absl::FunctionRef<void()> fn);

  // Runs fn(i) for every i in [0, num_threads()), item i always on the same
  // thread: 0 on the caller, k + 1 on worker k. For work whose thread_local
  // state must meet the same item every time (so it is sized once). Returns
  // when every call finished; fn must not call the pool.
  void RunOnThreads(absl::FunctionRef<void(int64_t)> fn);

 private:
  void WorkerLoop();
  // This thread's item in RunOnThreads: k + 1 on worker k, else 0.
  int64_t ThreadIndex() const;

  const int spin_us_;
  std::vector<std::thread> workers_;
  std::mutex call_mu_;    // Serializes ParallelFor callers.
  std::mutex ranges_mu_;  // Serializes ParallelRanges callers (shares_).

  // Claims the next item of the current job: true and *i, or false when
  // every item is taken.
  bool Claim(int64_t* i);
  // Runs items of the current job until none is left.
  void RunTasks();

  // The current job: fn_ is written before claim_ is published (release)
  // and read only after an item was claimed from it (acquire), when the job
  // cannot end before the item is done.
  std::atomic<const absl::FunctionRef<void(int64_t)>*> fn_{nullptr};
  // claim_, done_ and generation_ have a cache line each: the workers spin
  // on generation_ while the caller sets up a job and waits on done_ while
  // they claim, so sharing a line made each of these accesses pull it from
  // the other cores. A section (ParallelRanges, 2 threads, 3 runs of 3 us
  // each) took 10.83-10.99 us with the vCPUs on two core complexes, 10.59-
  // 10.64 apart (9 ideal); on one complex 9.5-9.6 either way.
  // (next index << 32) | number of items, of the current job.
  alignas(64) std::atomic<uint64_t> claim_{0};
  alignas(64) std::atomic<int64_t> done_{0};  // Items of the current job done.
  alignas(64) std::atomic<uint64_t> generation_{0};  // Bumped after claim_.
  std::atomic<bool> stop_{false};
  // ParallelRanges' shares: (begin << 32) | end, one cache line each.
  struct alignas(64) Share {
    std::atomic<uint64_t> range{0};
  };
  std::vector<Share> shares_;

  std::mutex mu_;  // Guards sleeping; sleepers_ changes only under it.
  std::condition_variable work_cv_;
  std::atomic<int> sleepers_{0};
};

}  // namespace braid::kernels::cpu

#endif  // BRAID_KERNELS_CPU_THREAD_POOL_H_
