#include "kernels/cpu/thread_pool.h"

#include <immintrin.h>

#include <algorithm>
#include <chrono>

namespace braid::kernels::cpu {
namespace {

using Clock = std::chrono::steady_clock;

inline void CpuRelax() { _mm_pause(); }

// The pool this thread is a worker of, and its index there (ThreadIndex).
thread_local const ThreadPool* tls_pool = nullptr;
thread_local int64_t tls_index = 0;

// Spins until done() (short waits), yielding the core after a while in case
// the thread waited for is descheduled.
template <typename Done>
void WaitUntil(Done done) {
  for (int i = 0; !done(); ++i) {
    if (i < 256) {
      CpuRelax();
    } else {
      std::this_thread::yield();
    }
  }
}

}  // namespace

ThreadPool::ThreadPool(int num_threads, int spin_us)
    : spin_us_(spin_us < 0 ? 0 : spin_us) {
  if (num_threads <= 0) {
    num_threads = static_cast<int>(std::thread::hardware_concurrency());
    if (num_threads <= 0) num_threads = 1;
  }
  shares_ = std::vector<Share>(num_threads);
  workers_.reserve(num_threads - 1);
  for (int i = 0; i < num_threads - 1; ++i) {
    workers_.emplace_back([this, i] {
      tls_pool = this;
      tls_index = i + 1;
      WorkerLoop();
    });
  }
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_.store(true);
  }
  work_cv_.notify_all();
  for (std::thread& t : workers_) t.join();
}

bool ThreadPool::Claim(int64_t* i) {
  uint64_t c = claim_.load(std::memory_order_acquire);
  for (;;) {
    const uint64_t next = c >> 32, n = c & 0xFFFFFFFFu;
    if (next >= n) return false;
    if (claim_.compare_exchange_weak(c, c + (uint64_t{1} << 32),
                                     std::memory_order_acq_rel,
                                     std::memory_order_acquire)) {
      *i = static_cast<int64_t>(next);
      return true;
    }
  }
}

void ThreadPool::RunTasks() {
  int64_t i;
  while (Claim(&i)) {
    // The job cannot end before this item is done, so fn_ is its fn.
    (*fn_.load(std::memory_order_relaxed))(i);
    done_.fetch_add(1, std::memory_order_release);
  }
}

void ThreadPool::WorkerLoop() {
  uint64_t seen = 0;
  for (;;) {
    // Spin a while for the next job, then sleep.
    const auto deadline = Clock::now() + std::chrono::microseconds(spin_us_);
    bool got = false;
    for (int i = 0; !got; ++i) {
      got = generation_.load(std::memory_order_acquire) != seen ||
            stop_.load(std::memory_order_relaxed);
      if (got || ((i & 15) == 15 && Clock::now() >= deadline)) break;
      // Pause briefly, then give the core away on each round: on a shared
      // machine a spinning worker must not starve the thread it waits for.
      if (i < 64) {
        CpuRelax();
      } else {
        std::this_thread::yield();
      }
    }
    if (!got) {
      std::unique_lock<std::mutex> lock(mu_);
      sleepers_.fetch_add(1);
      work_cv_.wait(lock,
                    [&] { return stop_.load() || generation_.load() != seen; });
      sleepers_.fetch_sub(1);
    }
    if (stop_.load()) return;
    seen = generation_.load(std::memory_order_acquire);
    RunTasks();
  }
}

void ThreadPool::RunOnEachThread(absl::FunctionRef<void()> fn) {
  const int n = num_threads();
  std::atomic<int> arrived{0};
  ParallelFor(n, [&](int64_t) {
    // Hold this thread until every item has been taken, so no thread takes
    // two.
    arrived.fetch_add(1);
    WaitUntil([&] { return arrived.load() == n; });
    fn();
  });
}

int64_t ThreadPool::ThreadIndex() const {
  return tls_pool == this ? tls_index : 0;
}

void ThreadPool::RunOnThreads(absl::FunctionRef<void(int64_t)> fn) {
  RunOnEachThread([&] { fn(ThreadIndex()); });
}

void ThreadPool::ParallelRanges(
    int64_t units, int64_t chunk,
    absl::FunctionRef<void(int64_t, int64_t, int64_t)> fn) {
  if (units <= 0) return;
  chunk = std::max<int64_t>(1, chunk);
  const int p = num_threads();
  if (p == 1 || units == 1) {
    fn(0, units, units);
    return;
  }
  // Shares' bounds fit 32 bits; larger ranges run as several.
  constexpr int64_t kMaxUnits = int64_t{1} << 31;
  if (units > kMaxUnits) {
    for (int64_t first = 0; first < units; first += kMaxUnits) {
      ParallelRanges(std::min(kMaxUnits, units - first), chunk,
                     [&](int64_t u0, int64_t u1, int64_t end) {
                       fn(first + u0, first + u1, first + end);
                     });
    }
    return;
  }
  std::lock_guard<std::mutex> call_lock(ranges_mu_);
  for (int i = 0; i < p; ++i) {
    const uint64_t b = static_cast<uint64_t>(i * units / p);
    const uint64_t e = static_cast<uint64_t>((i + 1) * units / p);
    shares_[i].range.store((b << 32) | e, std::memory_order_relaxed);
  }
  // Takes a run from the front (or back) of a share: true and [*u0, *u1)
  // with the share's end as it stood, or false when the share is empty.
  auto take = [chunk](std::atomic<uint64_t>& share, bool front, int64_t* u0,
                      int64_t* u1, int64_t* end) {
    uint64_t c = share.load(std::memory_order_relaxed);
    for (;;) {
      const int64_t b = static_cast<int64_t>(c >> 32);
      const int64_t e = static_cast<int64_t>(c & 0xFFFFFFFFu);
      if (b >= e) return false;
      *u0 = front ? b : std::max(b, e - chunk);
      *u1 = front ? std::min(e, b + chunk) : e;
      const uint64_t rest = front ? (static_cast<uint64_t>(*u1) << 32) | e
                                  : (static_cast<uint64_t>(b) << 32) | *u0;
      if (share.compare_exchange_weak(c, rest, std::memory_order_relaxed)) {
        *end = e;
        return true;
      }
    }
  };
  ParallelFor(p, [&](int64_t self) {
    int64_t u0, u1, end;
    while (take(shares_[self].range, /*front=*/true, &u0, &u1, &end)) {
      fn(u0, u1, end);
    }
    for (int k = 1; k < p; ++k) {
      while (take(shares_[(self + k) % p].range, /*front=*/false, &u0, &u1,
                  &end)) {
        fn(u0, u1, u1);
      }
    }
  });
}

void ThreadPool::ParallelFor(int64_t n, absl::FunctionRef<void(int64_t)> fn) {
  if (n <= 0) return;
  if (workers_.empty() || n == 1) {
    for (int64_t i = 0; i < n; ++i) fn(i);
    return;
  }
  // A job's size fits in claim_'s 32 bits; larger ranges run as several.
  constexpr int64_t kMaxJob = int64_t{1} << 31;
  if (n > kMaxJob) {
    for (int64_t first = 0; first < n; first += kMaxJob) {
      ParallelFor(std::min(kMaxJob, n - first),
                  [&](int64_t i) { fn(first + i); });
    }
    return;
  }
  std::lock_guard<std::mutex> call_lock(call_mu_);
  fn_.store(&fn, std::memory_order_relaxed);
  done_.store(0, std::memory_order_relaxed);
  claim_.store(static_cast<uint64_t>(n), std::memory_order_release);
  generation_.fetch_add(1);  // seq_cst: ordered before the sleepers_ load.
  if (sleepers_.load() > 0) {
    std::lock_guard<std::mutex> lock(mu_);
    work_cv_.notify_all();
  }
  RunTasks();
  // Items other threads hold; yield the core if one is descheduled.
  WaitUntil([&] { return done_.load(std::memory_order_acquire) == n; });
}

}  // namespace braid::kernels::cpu
