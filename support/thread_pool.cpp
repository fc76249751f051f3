#include "support/thread_pool.h"

#include <chrono>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace kiln {
namespace {

thread_local bool in_task = false; // inside a task of some pool

// Runs a task with in_task set: a parallelFor it calls runs inline.
void runTask(const std::function<void(int64_t, int)> &fn, int64_t task, int worker) {
  const bool outer = in_task;
  in_task = true;
  fn(task, worker);
  in_task = outer;
}

void relax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#else
  std::this_thread::yield();
#endif
}

// Spins until `ready()` or `micros` have passed; whether it became ready.
// The clock is read once every 64 polls: a poll is a pause, about 40 ns
// on current cores.
template <typename Ready> bool spinUntil(Ready ready, int64_t micros) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::microseconds(micros);
  for (;;) {
    for (int i = 0; i < 64; ++i) {
      if (ready())
        return true;
      relax();
    }
    if (std::chrono::steady_clock::now() >= end)
      return ready();
  }
}

} // namespace

ThreadPool::ThreadPool(int threads) {
  if (threads <= 0)
    threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  for (int w = 1; w < threads; ++w)
    workers_.emplace_back([this, w] { work(w); });
}

ThreadPool &ThreadPool::shared() {
  static ThreadPool pool;
  return pool;
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  for (std::thread &t : workers_)
    t.join();
}

// Takes tasks of the current job until none is left.
void ThreadPool::drain(int worker) {
  for (;;) {
    const int64_t task = next_.fetch_add(1);
    if (task >= tasks_)
      return;
    runTask(*job_, task, worker);
    finished_.fetch_add(1, std::memory_order_release);
  }
}

uint64_t ThreadPool::awaitJob(uint64_t seen) {
  uint64_t found = 0; // the published generation seen, always even
  auto published = [&] {
    const uint64_t g = generation_.load();
    if (g == seen || g % 2 != 0)
      return false;
    found = g;
    return true;
  };
  if (spinUntil([&] { return published() || stop_.load(std::memory_order_relaxed); },
                kSpinMicroseconds))
    return stop_ ? 0 : found;
  std::unique_lock<std::mutex> lock(mutex_);
  ++sleepers_; // before the check in wait(): parallelFor reads it after publishing
  wake_.wait(lock, [&] { return stop_ || published(); });
  --sleepers_;
  return stop_ ? 0 : found;
}

void ThreadPool::work(int worker) {
  uint64_t seen = 0;
  for (;;) {
    const uint64_t generation = awaitJob(seen);
    if (generation == 0)
      return;
    seen = generation;
    // Announce the drain, then check that the job is still the one seen: if
    // parallelFor began writing the next job meanwhile (odd generation), it
    // either saw this worker draining and waits, or this check sees it.
    ++draining_;
    if (generation_.load() == generation)
      drain(worker);
    --draining_;
  }
}

void ThreadPool::parallelFor(int64_t tasks,
                             const std::function<void(int64_t task, int worker)> &fn) {
  if (tasks <= 0)
    return;
  if (tasks == 1 || workers_.empty() || in_task) {
    for (int64_t t = 0; t < tasks; ++t)
      fn(t, 0);
    return;
  }
  std::lock_guard<std::mutex> caller(caller_);
  // Odd: the job is being written. Workers still draining the previous one
  // (finding no task left) leave first.
  generation_.fetch_add(1);
  while (draining_.load() != 0)
    relax();
  job_ = &fn;
  tasks_ = tasks;
  next_.store(0, std::memory_order_relaxed);
  finished_.store(0, std::memory_order_relaxed);
  generation_.fetch_add(1); // even: published
  if (sleepers_.load() > 0) {
    std::lock_guard<std::mutex> lock(mutex_);
    wake_.notify_all();
  }
  drain(0);
  // The caller's own share is done: the rest are running on the workers.
  while (finished_.load(std::memory_order_acquire) != tasks)
    if (!spinUntil([&] { return finished_.load(std::memory_order_acquire) == tasks; },
                   kSpinMicroseconds))
      std::this_thread::yield();
}

} // namespace kiln
