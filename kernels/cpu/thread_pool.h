// A fixed-size pool of worker threads for data-parallel kernel loops.
//
// Threads are created once in the constructor and joined in the destructor.
// ParallelFor(n, fn) runs fn(i) for every i in [0, n) on the workers and the
// calling thread, and returns when all calls finished. It allocates nothing per
// call. Only one ParallelFor may run at a time (one engine thread drives the
// pool); calls from several threads at once are serialized by an internal
// mutex. fn must not call ParallelFor on the same pool.
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
  // num_threads <= 0 means std::thread::hardware_concurrency().
  explicit ThreadPool(int num_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return static_cast<int>(workers_.size()) + 1; }

  void ParallelFor(int64_t n, absl::FunctionRef<void(int64_t)> fn);

 private:
  void WorkerLoop();
  void RunTasks();

  std::vector<std::thread> workers_;
  std::mutex call_mu_;  // Serializes ParallelFor callers.

  std::mutex mu_;
  std::condition_variable work_cv_;
  std::condition_variable done_cv_;
  uint64_t generation_ = 0;  // Guarded by mu_; bumped per ParallelFor.
  int active_workers_ = 0;   // Guarded by mu_; workers still inside a job.
  bool stop_ = false;        // Guarded by mu_.

  // The current job; written before generation_ is bumped under mu_.
  const absl::FunctionRef<void(int64_t)>* fn_ = nullptr;
  int64_t n_ = 0;
  std::atomic<int64_t> next_{0};
};

}  // namespace braid::kernels::cpu

#endif  // BRAID_KERNELS_CPU_THREAD_POOL_H_
