// ThreadPool: every task once per job across many jobs, the work really on
// two threads at once (also after the workers fell asleep), nested and
// concurrent callers.
#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "support/thread_pool.h"

namespace kiln {
namespace {

using Clock = std::chrono::steady_clock;

// Two tasks that each wait for the other to have started: they finish only
// when two threads run them at the same time. False after 10 s.
bool runsTwoAtOnce(ThreadPool &pool) {
  std::atomic<int> started{0};
  std::atomic<bool> met{true};
  pool.parallelFor(2, [&](int64_t, int) {
    ++started;
    const auto end = Clock::now() + std::chrono::seconds(10);
    while (started.load() < 2)
      if (Clock::now() > end) {
        met = false;
        return;
      }
  });
  return met;
}

TEST(ThreadPoolTest, RunsEveryTaskOnceInEveryJob) {
  ThreadPool pool(3);
  ASSERT_EQ(pool.size(), 3);
  for (int job = 0; job < 5000; ++job) {
    const int64_t tasks = 2 + job % 37;
    std::vector<std::atomic<int>> runs(static_cast<size_t>(tasks));
    std::atomic<bool> worker_in_range{true};
    pool.parallelFor(tasks, [&](int64_t t, int worker) {
      ++runs[static_cast<size_t>(t)];
      if (worker < 0 || worker >= pool.size())
        worker_in_range = false;
    });
    for (int64_t t = 0; t < tasks; ++t)
      ASSERT_EQ(runs[static_cast<size_t>(t)].load(), 1) << "job " << job << " task " << t;
    ASSERT_TRUE(worker_in_range) << "job " << job;
  }
}

TEST(ThreadPoolTest, RunsTasksOnTwoThreadsAtOnce) {
  ThreadPool pool(2);
  for (int i = 0; i < 200; ++i)
    ASSERT_TRUE(runsTwoAtOnce(pool)) << "job " << i;
}

TEST(ThreadPoolTest, WakesWorkersThatFellAsleep) {
  ThreadPool pool(2);
  for (int i = 0; i < 5; ++i) {
    // Idle well past the spin: the worker blocks, and the next job wakes it.
    std::this_thread::sleep_for(std::chrono::microseconds(20 * ThreadPool::kSpinMicroseconds));
    ASSERT_TRUE(runsTwoAtOnce(pool)) << "job " << i;
  }
}

TEST(ThreadPoolTest, NestedCallRunsOnTheCallingThread) {
  ThreadPool pool(2);
  std::atomic<int> inner{0};
  pool.parallelFor(4, [&](int64_t, int) {
    const std::thread::id outer = std::this_thread::get_id();
    pool.parallelFor(3, [&](int64_t, int) {
      EXPECT_EQ(std::this_thread::get_id(), outer);
      ++inner;
    });
  });
  EXPECT_EQ(inner.load(), 12);
}

TEST(ThreadPoolTest, CallersOnOtherThreadsTakeTurns) {
  ThreadPool pool(2);
  std::atomic<int64_t> sum{0};
  std::vector<std::thread> callers;
  for (int c = 0; c < 3; ++c)
    callers.emplace_back([&] {
      for (int job = 0; job < 500; ++job)
        pool.parallelFor(8, [&](int64_t t, int) { sum += t; });
    });
  for (std::thread &t : callers)
    t.join();
  EXPECT_EQ(sum.load(), 3 * 500 * 28);
}

TEST(ThreadPoolTest, SharedPoolHasOneThreadPerCore) {
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  EXPECT_EQ(ThreadPool::shared().size(), cores);
  EXPECT_EQ(&ThreadPool::shared(), &ThreadPool::shared());
}

} // namespace
} // namespace kiln
