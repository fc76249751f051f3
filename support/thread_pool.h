// A fixed set of worker threads: kiln's one way of running work in parallel
// on the host. The executors (a kernel's tiles), the trainer (the gradient
// norm) and the in-process communicator share one pool per process,
// ThreadPool::shared(): the host's cores are shared by all simulated devices,
// and two pools spinning at once would take each other's cores. The kernel
// compiler runs LLVM on one of its own per compile.
//
// A training step launches hundreds of kernels of tens of microseconds each,
// so the hand-off between threads must cost far less than that. Waking a
// thread blocked on a futex took 25-80 us on a virtual machine (AMD EPYC
// Zen 5, 2 cores: the idle vCPU halts), so workers and the caller first spin on atomics, as OpenMP
// runtimes do (OMP_WAIT_POLICY), and block only after kSpinMicroseconds
// without work.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace kiln {

class ThreadPool {
public:
  // How long an idle worker spins before it blocks: longer than the gap
  // between two kernels of a step, short enough that a pool left idle gives
  // its core back to the next one (the replicas of a process run one after
  // another, each on its executor's pool).
  static constexpr int64_t kSpinMicroseconds = 500;

  // `threads` <= 0: one per core.
  explicit ThreadPool(int threads = 0);
  ~ThreadPool();
  // The process's pool, one thread per core, made at the first call.
  static ThreadPool &shared();
  ThreadPool(const ThreadPool &) = delete;
  ThreadPool &operator=(const ThreadPool &) = delete;

  int size() const { return static_cast<int>(workers_.size()) + 1; }
  // Runs fn(task, worker) for every task in [0, tasks) and returns when all
  // are done; `worker` in [0, size()) names the thread, for per-thread scratch.
  // The calling thread works too. Callers on other threads wait their turn;
  // a call from inside a task runs its tasks on the calling thread.
  void parallelFor(int64_t tasks, const std::function<void(int64_t task, int worker)> &fn);

private:
  void work(int worker);
  void drain(int worker);
  // Waits until `generation_` differs from `seen` and is even (a published
  // job), or the pool stops; that even generation, or 0 when stopping.
  uint64_t awaitJob(uint64_t seen);

  std::vector<std::thread> workers_;
  std::mutex caller_; // one job at a time
  // The current job. Written only while `generation_` is odd and no worker
  // is inside drain(); read by workers that entered drain() for an even
  // generation (a seqlock: see parallelFor).
  const std::function<void(int64_t, int)> *job_ = nullptr;
  int64_t tasks_ = 0;
  std::atomic<int64_t> next_{0}, finished_{0};
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> draining_{0}; // workers inside drain()
  // Blocking, for workers idle longer than the spin.
  std::mutex mutex_;
  std::condition_variable wake_;
  std::atomic<int> sleepers_{0};
  std::atomic<bool> stop_{false};
};

} // namespace kiln
