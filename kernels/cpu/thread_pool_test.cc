#include "kernels/cpu/thread_pool.h"

#include <atomic>
#include <chrono>
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

TEST(ThreadPoolTest, DefaultUsesHardwareConcurrency) {
  ThreadPool pool(0);
  EXPECT_GE(pool.num_threads(), 1);
}

}  // namespace
}  // namespace braid::kernels::cpu
