// The two ceilings a kernel on this host can reach, measured rather than
// taken from a data sheet: sgemm's throughput (OpenBLAS, one call per core,
// as the executor runs its tiles) and the bandwidth of a copy too large for
// the caches. The profiler's "Roofline %" is a kernel's time at these
// ceilings, max(FLOPs / gemm, bytes / bandwidth), over its measured time.
#pragma once

#include "ir/dtype.h"
#include "support/thread_pool.h"

namespace kiln::runtime {

struct HostRoofline {
  double gemm_flops_per_s = 0;
  double bytes_per_s = 0;
  // The best GEMM rates per operand dtype, for a step's GEMM floor (its
  // matmuls' FLOPs at these rates): a 1024^3 GEMM, one single-threaded call
  // per thread as the executor runs its blocks; f32 the faster of oneDNN and
  // sgemm, bf16 on oneDNN where the host has bf16 units (else 0: bf16
  // operands are widened to f32).
  double best_f32_gemm_flops_per_s = 0;
  double best_bf16_gemm_flops_per_s = 0;
  // The kernel's best possible time over `seconds`, in percent.
  double percent(double flops, double bytes, double seconds) const;
  // The best GEMM rate for operands of `dtype`: bf16's where the host has
  // bf16 units, else f32's (bf16 operands are widened).
  double bestGemmRate(DType dtype) const;
  // Each ceiling the higher of this measurement's and `other`'s: a ceiling
  // is the best the host reached, and one measurement taken while something
  // else ran (a burst on a shared host) would lower every ratio against it.
  void keepBest(const HostRoofline &other);
};

// About 0.2 s of measuring on every thread of `pool`.
HostRoofline measureHostRoofline(ThreadPool &pool);

} // namespace kiln::runtime
