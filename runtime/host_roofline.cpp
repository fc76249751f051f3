#include "runtime/host_roofline.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <vector>

#include <cblas.h>

#include "kernels/gemm.h"

namespace kiln::runtime {

double HostRoofline::percent(double flops, double bytes, double seconds) const {
  if (seconds <= 0 || gemm_flops_per_s <= 0 || bytes_per_s <= 0)
    return 0;
  const double best = std::max(flops / gemm_flops_per_s, bytes / bytes_per_s);
  return 100.0 * best / seconds;
}

double HostRoofline::bestGemmRate(DType dtype) const {
  return dtype == DType::BF16 && best_bf16_gemm_flops_per_s > 0 ? best_bf16_gemm_flops_per_s
                                                                : best_f32_gemm_flops_per_s;
}

void HostRoofline::keepBest(const HostRoofline &other) {
  gemm_flops_per_s = std::max(gemm_flops_per_s, other.gemm_flops_per_s);
  bytes_per_s = std::max(bytes_per_s, other.bytes_per_s);
  best_f32_gemm_flops_per_s = std::max(best_f32_gemm_flops_per_s, other.best_f32_gemm_flops_per_s);
  best_bf16_gemm_flops_per_s =
      std::max(best_bf16_gemm_flops_per_s, other.best_bf16_gemm_flops_per_s);
}

namespace {

using Clock = std::chrono::steady_clock;

// The best of `repeats` timings of fn() run on every thread at once.
template <typename Fn> double bestSeconds(ThreadPool &pool, int repeats, Fn fn) {
  double best = 1e30;
  for (int r = 0; r < repeats; ++r) {
    const auto start = Clock::now();
    pool.parallelFor(pool.size(), [&](int64_t, int worker) { fn(worker); });
    best = std::min(best, std::chrono::duration<double>(Clock::now() - start).count());
  }
  return best;
}

} // namespace

HostRoofline measureHostRoofline(ThreadPool &pool) {
  const int threads = pool.size();
  HostRoofline roofline;
  // A square sgemm large enough to reach the kernel's steady state, one
  // single-threaded call per thread as the executor's tiles run.
  kernels::useSingleThreadedBlas();
  constexpr int n = 512;
  std::vector<std::vector<float>> a(threads, std::vector<float>(n * n, 1.0f)), b = a, c = a;
  const double gemm = bestSeconds(pool, 5, [&](int w) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a[w].data(), n,
                b[w].data(), n, 0.0f, c[w].data(), n);
  });
  roofline.gemm_flops_per_s = threads * 2.0 * n * n * n / gemm;
  {
    constexpr int big = 1024;
    std::vector<std::vector<float>> x(threads, std::vector<float>(big * big, 1.0f)), y = x, z = x;
    const double f32 = bestSeconds(pool, 3, [&](int w) {
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, big, big, big, 1.0f, x[w].data(), big,
                  y[w].data(), big, 0.0f, z[w].data(), big);
    });
    kernels::GemmPlan plan;
    plan.m = plan.n = plan.k = big;
    // The executor runs f32 matmuls on oneDNN (sgemm where oneDNN cannot):
    // the faster of the two is the rate to reach.
    bool ok = true;
    const double dnnl = bestSeconds(pool, 3, [&](int w) {
      if (!kernels::gemmDnnlBlock(plan, DType::F32, x[w].data(), y[w].data(),
                                  {0, 1, 0, big, 0, big}, z[w].data()))
        ok = false;
    });
    roofline.best_f32_gemm_flops_per_s =
        threads * 2.0 * big * big * big / (ok ? std::min(f32, dnnl) : f32);
    if (kernels::hostHasBf16Gemm()) {
      // bf16 1.0 is 0x3F80.
      std::vector<std::vector<uint16_t>> p(threads, std::vector<uint16_t>(big * big, 0x3F80));
      ok = true;
      const double bf16 = bestSeconds(pool, 3, [&](int w) {
        if (!kernels::gemmBf16(plan, p[w].data(), p[w].data(), z[w].data()))
          ok = false;
      });
      if (ok)
        roofline.best_bf16_gemm_flops_per_s = threads * 2.0 * big * big * big / bf16;
    }
  }
  // A copy past the last-level cache: 32 MiB read and 32 MiB written per thread.
  constexpr size_t bytes = size_t{32} << 20;
  std::vector<std::vector<char>> src(threads, std::vector<char>(bytes, 1)), dst = src;
  const double copy =
      bestSeconds(pool, 3, [&](int w) { std::memcpy(dst[w].data(), src[w].data(), bytes); });
  roofline.bytes_per_s = threads * 2.0 * static_cast<double>(bytes) / copy;
  return roofline;
}

} // namespace kiln::runtime
