#include "kernels/cpu/thread_pool.h"

#include <pthread.h>
#include <semaphore.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <future>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace braid::kernels::cpu {
namespace {

TEST(ThreadPoolTest, RunsEveryIndexExactlyOnce) {
  for (int threads : {1, 2, 4}) {
    ThreadPool pool(threads);
    EXPECT_EQ(pool.num_threads(), threads);
    for (int64_t n : {0, 1, 3, 100, 1000}) {
      std::vector<std::atomic<int>> hits(n);
      pool.ParallelFor(n, [&](int64_t i) { hits[i].fetch_add(1); });
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << i;
    }
  }
}

TEST(ThreadPoolTest, ManySmallCallsComplete) {
  ThreadPool pool(3);
  std::atomic<int64_t> total{0};
  for (int call = 0; call < 2000; ++call) {
    pool.ParallelFor(5, [&](int64_t i) { total.fetch_add(i); });
  }
  EXPECT_EQ(total.load(), 2000 * 10);
}

// Workers that went to sleep (no spinning) still wake for every job, and
// calls far apart (workers asleep) and back to back (workers spinning) mix.
TEST(ThreadPoolTest, SleepingAndSpinningWorkersWake) {
  for (int spin_us : {0, 50, 100000}) {
    ThreadPool pool(3, spin_us);
    std::atomic<int64_t> total{0};
    for (int call = 0; call < 300; ++call) {
      if (call % 50 == 0) {
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
      }
      pool.ParallelFor(7, [&](int64_t i) { total.fetch_add(i); });
    }
    EXPECT_EQ(total.load(), 300 * 21) << spin_us;
  }
}

// RunOnEachThread reaches every thread exactly once, also right after the
// workers went to sleep.
TEST(ThreadPoolTest, RunOnEachThreadReachesEveryThreadOnce) {
  for (int threads : {1, 2, 4}) {
    for (int spin_us : {0, 200}) {
      ThreadPool pool(threads, spin_us);
      for (int call = 0; call < 50; ++call) {
        if (call % 10 == 0) {
          std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
        std::mutex mu;
        std::set<std::thread::id> ids;
        int calls = 0;
        pool.RunOnEachThread([&] {
          std::lock_guard<std::mutex> lock(mu);
          ids.insert(std::this_thread::get_id());
          ++calls;
        });
        ASSERT_EQ(calls, threads);
        ASSERT_EQ(static_cast<int>(ids.size()), threads);
      }
    }
  }
}

// RunOnThreads runs every item once a call, item i on the same thread every
// call and item 0 on the caller (also one of another pool's workers).
TEST(ThreadPoolTest, RunOnThreadsKeepsEachItemOnItsThread) {
  for (int threads : {1, 2, 4}) {
    ThreadPool pool(threads, 0);
    std::vector<std::thread::id> first(threads);
    for (int call = 0; call < 50; ++call) {
      std::mutex mu;
      std::vector<std::thread::id> ran(threads);
      std::vector<int> count(threads, 0);
      pool.RunOnThreads([&](int64_t i) {
        std::lock_guard<std::mutex> lock(mu);
        ran[i] = std::this_thread::get_id();
        ++count[i];
      });
      for (int i = 0; i < threads; ++i) ASSERT_EQ(count[i], 1) << i;
      if (call == 0) first = ran;
      ASSERT_EQ(ran, first) << "call " << call;
      ASSERT_EQ(ran[0], std::this_thread::get_id());
    }
  }
  // From a worker of another pool, item 0 still runs on the calling thread.
  ThreadPool outer(2, 0), inner(2, 0);
  std::set<std::thread::id> ids;
  std::mutex mu;
  outer.RunOnThreads([&](int64_t i) {
    std::thread::id self = std::this_thread::get_id();
    inner.RunOnThreads([&](int64_t j) {
      if (j == 0) {
        std::lock_guard<std::mutex> lock(mu);
        ids.insert(std::this_thread::get_id());
        EXPECT_EQ(std::this_thread::get_id(), self) << "outer item " << i;
      }
    });
  });
  EXPECT_EQ(ids.size(), 2u);
}

// A job ends when its items are done: a worker that is stopped (here by a
// signal handler that blocks, as the OS deschedules a thread on a busy
// machine) before it claims anything is not waited for, and joins the pool's
// later jobs when it runs again. The old rule (every worker checks in) hung
// here until the worker ran.
sem_t g_release;
std::atomic<bool> g_frozen{false};
void Freeze(int) {
  g_frozen.store(true);
  while (sem_wait(&g_release) != 0) {
  }
}

TEST(ThreadPoolTest, JobDoesNotWaitForAStoppedWorker) {
  ASSERT_EQ(sem_init(&g_release, 0, 0), 0);
  struct sigaction sa = {};
  sa.sa_handler = Freeze;
  ASSERT_EQ(sigaction(SIGUSR1, &sa, nullptr), 0);
  ThreadPool pool(2, /*spin_us=*/1000000);  // the worker spins, holds no lock
  const pthread_t caller = pthread_self();
  pthread_t worker = caller;
  pool.RunOnEachThread([&] {
    if (!pthread_equal(pthread_self(), caller)) worker = pthread_self();
  });
  ASSERT_FALSE(pthread_equal(worker, caller));
  ASSERT_EQ(pthread_kill(worker, SIGUSR1), 0);
  while (!g_frozen.load()) std::this_thread::yield();

  std::vector<std::atomic<int>> hits(100);
  auto job = std::async(std::launch::async, [&] {
    pool.ParallelFor(100, [&](int64_t i) { hits[i].fetch_add(1); });
  });
  const bool ended =
      job.wait_for(std::chrono::seconds(20)) == std::future_status::ready;
  sem_post(&g_release);  // let the worker go in any case
  job.wait();
  EXPECT_TRUE(ended) << "the job waited for the stopped worker";
  for (int i = 0; i < 100; ++i) ASSERT_EQ(hits[i].load(), 1) << i;
  // The worker takes part again.
  std::mutex mu;
  std::set<std::thread::id> ids;
  pool.RunOnEachThread([&] {
    std::lock_guard<std::mutex> lock(mu);
    ids.insert(std::this_thread::get_id());
  });
  EXPECT_EQ(ids.size(), 2u);
  std::atomic<int64_t> total{0};
  for (int call = 0; call < 500; ++call) {
    pool.ParallelFor(9, [&](int64_t i) { total.fetch_add(i); });
  }
  EXPECT_EQ(total.load(), 500 * 36);
  sem_destroy(&g_release);
}

// ParallelRanges covers every unit once, in runs of at most `chunk` units
// whose share_end is at or past their end.
TEST(ThreadPoolTest, ParallelRangesCoversEveryUnitOnce) {
  for (int threads : {1, 2, 3, 4}) {
    ThreadPool pool(threads);
    for (int64_t units : {0, 1, 2, 3, 7, 64, 1000}) {
      for (int64_t chunk : {1, 3, 16, 5000}) {
        std::vector<std::atomic<int>> hits(units);
        std::atomic<bool> bad{false};
        pool.ParallelRanges(
            units, chunk, [&](int64_t u0, int64_t u1, int64_t end) {
              if (u0 < 0 || u1 > units || u0 >= u1 ||
                  (units > 1 && threads > 1 && u1 - u0 > chunk) || end < u1 ||
                  end > units) {
                bad = true;
              }
              for (int64_t u = u0; u < u1; ++u) {
                hits[u].fetch_add(1);
              }
            });
        ASSERT_FALSE(bad.load()) << threads << " " << units << " " << chunk;
        for (int64_t u = 0; u < units; ++u) {
          ASSERT_EQ(hits[u].load(), 1)
              << threads << " " << units << " " << chunk << " " << u;
        }
      }
    }
  }
}

// A thread held inside its first run leaves the rest of its share to the
// other: the caller takes it from the back, so everything but the held run
// is done while it is held (a split into fixed tasks would wait here).
TEST(ThreadPoolTest, ParallelRangesTakesFromAHeldThreadsShare) {
  ThreadPool pool(2, /*spin_us=*/1000000);
  const std::thread::id caller = std::this_thread::get_id();
  constexpr int64_t kUnits = 64;
  // The worker must take a run for the case to arise; on a busy machine it
  // may not get a core in time, so the call is repeated until it does.
  bool worker_ran = false;
  for (int attempt = 0; attempt < 10 && !worker_ran; ++attempt) {
    pool.RunOnEachThread([] {});  // the worker is up and spinning
    std::atomic<int64_t> done{0};
    std::atomic<bool> worker_held{false}, released_by_progress{false};
    pool.ParallelRanges(kUnits, 4, [&](int64_t u0, int64_t u1, int64_t) {
      if (std::this_thread::get_id() == caller) {
        // Slow enough that the worker takes its share before the caller
        // is through its own.
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
      } else if (!worker_held.exchange(true)) {
        const auto deadline =
            std::chrono::steady_clock::now() + std::chrono::seconds(20);
        while (done.load() < kUnits - (u1 - u0) &&
               std::chrono::steady_clock::now() < deadline) {
          std::this_thread::yield();
        }
        released_by_progress = done.load() == kUnits - (u1 - u0);
      }
      done.fetch_add(u1 - u0);
    });
    EXPECT_EQ(done.load(), kUnits);
    worker_ran = worker_held.load();
    if (worker_ran) {
      EXPECT_TRUE(released_by_progress.load())
          << "the rest of the held thread's share was not taken";
    }
  }
  EXPECT_TRUE(worker_ran) << "the worker never took a run in 10 attempts";
}

TEST(ThreadPoolTest, DefaultUsesHardwareConcurrency) {
  ThreadPool pool(0);
  EXPECT_GE(pool.num_threads(), 1);
}

}  // namespace
}  // namespace braid::kernels::cpu
