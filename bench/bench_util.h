// What the benchmarks share: the core count, and waiting for a quiet machine
// (a 2-core VM shared with builds times badly otherwise).
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <thread>

#include <sys/resource.h>

namespace kiln::bench {

inline int cores() { return static_cast<int>(std::max(1u, std::thread::hardware_concurrency())); }

// Fraction of the machine's CPU time that was idle over `ms` (from
// /proc/stat; 1 where it cannot be read).
inline double idleFraction(int ms) {
  auto read = [](uint64_t &idle, uint64_t &total) {
    idle = total = 0;
    FILE *f = std::fopen("/proc/stat", "r");
    if (!f)
      return false;
    unsigned long long v[8] = {};
    const int n = std::fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2],
                              &v[3], &v[4], &v[5], &v[6], &v[7]);
    std::fclose(f);
    if (n < 5)
      return false;
    for (int i = 0; i < n; ++i)
      total += v[i];
    idle = v[3] + v[4];
    return true;
  };
  uint64_t i0, t0, i1, t1;
  const bool ok0 = read(i0, t0);
  std::this_thread::sleep_for(std::chrono::milliseconds(ms));
  if (!ok0 || !read(i1, t1) || t1 <= t0)
    return 1.0;
  return static_cast<double>(i1 - i0) / static_cast<double>(t1 - t0);
}

// Waits up to `seconds` for the machine to be at least 90% idle.
inline void waitForIdle(double seconds) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (seconds > 0 && idleFraction(200) < 0.9 && std::chrono::steady_clock::now() < deadline) {
  }
}

// Minor page faults of the process so far.
inline double minorFaults() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_minflt);
}

} // namespace kiln::bench
