#include "support/thread_pool.h"

namespace kiln {

ThreadPool::ThreadPool(int threads) {
  if (threads <= 0)
    threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  for (int w = 1; w < threads; ++w)
    workers_.emplace_back([this, w] { work(w); });
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
  std::unique_lock<std::mutex> lock(mutex_);
  while (job_ && next_ < tasks_) {
    const int64_t task = next_++;
    const auto *job = job_;
    lock.unlock();
    (*job)(task, worker);
    lock.lock();
    if (++finished_ == tasks_)
      done_.notify_all();
  }
}

void ThreadPool::work(int worker) {
  uint64_t seen = 0;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_)
        return;
      seen = generation_;
    }
    drain(worker);
  }
}

void ThreadPool::parallelFor(int64_t tasks,
                             const std::function<void(int64_t task, int worker)> &fn) {
  if (tasks <= 0)
    return;
  if (tasks == 1 || workers_.empty()) {
    for (int64_t t = 0; t < tasks; ++t)
      fn(t, 0);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    job_ = &fn;
    tasks_ = tasks;
    next_ = 0;
    finished_ = 0;
    ++generation_;
  }
  wake_.notify_all();
  drain(0);
  std::unique_lock<std::mutex> lock(mutex_);
  done_.wait(lock, [&] { return finished_ == tasks_; });
  job_ = nullptr;
}

} // namespace kiln
