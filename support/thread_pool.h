// A fixed set of worker threads: kiln's one way of running work in parallel
// on the host. The executor runs a kernel's tiles on one pool per process
// (the host's cores are shared by all simulated devices, and a kernel's tiles
// never start more threads); the kernel compiler runs LLVM on one per
// compile.
#pragma once

#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace kiln {

class ThreadPool {
public:
  // `threads` <= 0: one per core.
  explicit ThreadPool(int threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool &) = delete;
  ThreadPool &operator=(const ThreadPool &) = delete;

  int size() const { return static_cast<int>(workers_.size()) + 1; }
  // Runs fn(task, worker) for every task in [0, tasks) and returns when all
  // are done; `worker` in [0, size()) names the thread, for per-thread scratch.
  // The calling thread works too.
  void parallelFor(int64_t tasks, const std::function<void(int64_t task, int worker)> &fn);

private:
  void work(int worker);
  void drain(int worker);

  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  const std::function<void(int64_t, int)> *job_ = nullptr;
  int64_t tasks_ = 0, next_ = 0, finished_ = 0;
  uint64_t generation_ = 0;
  bool stop_ = false;
};

} // namespace kiln
