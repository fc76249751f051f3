#include "runtime/dnnl_blocks.h"

#include <algorithm>
#include <atomic>
#include <functional>

#include "ir/float_status.h"
#include "kernels/float_rows.h"

namespace kiln::runtime {
namespace {

// Runs `block` on each thread's block of `gemm`'s result.
void forEachBlock(ThreadPool &pool, const kernels::GemmPlan &gemm,
                  const std::function<void(const kernels::GemmBlock &)> &block) {
  const int64_t threads = pool.size();
  if (gemm.batch > 1) {
    const int64_t blocks = std::min<int64_t>(gemm.batch, threads);
    pool.parallelFor(blocks, [&](int64_t t, int) {
      block({gemm.batch * t / blocks, gemm.batch * (t + 1) / blocks, 0, gemm.m, 0, gemm.n});
    });
  } else if (gemm.m >= gemm.n) {
    const int64_t height = ((gemm.m + threads - 1) / threads + 15) / 16 * 16;
    pool.parallelFor(threads, [&](int64_t t, int) {
      const int64_t r0 = std::min(gemm.m, t * height);
      block({0, 1, r0, std::min(gemm.m, r0 + height), 0, gemm.n});
    });
  } else {
    const int64_t width = ((gemm.n + threads - 1) / threads + 15) / 16 * 16;
    pool.parallelFor(threads, [&](int64_t t, int) {
      const int64_t c0 = std::min(gemm.n, t * width);
      block({0, 1, 0, gemm.m, c0, std::min(gemm.n, c0 + width)});
    });
  }
}

// Whether every element of the block of `c` is finite.
bool blockFinite(const kernels::GemmPlan &gemm, const kernels::GemmBlock &block, const float *c) {
  for (int64_t b = block.batch_begin; b < block.batch_end; ++b)
    for (int64_t r = block.row_begin; r < block.row_end; ++r)
      if (!kernels::allFinite(c + (b * gemm.m + r) * gemm.n + block.col_begin,
                              block.col_end - block.col_begin))
        return false;
  return true;
}

} // namespace

bool dnnlBlocks(ThreadPool &pool, const kernels::GemmPlan &gemm, DType dtype, const void *a,
                const void *b, float *c) {
  std::atomic<bool> ok = true;
  forEachBlock(pool, gemm, [&](const kernels::GemmBlock &block) {
    if (!kernels::gemmDnnlBlock(gemm, dtype, a, b, block, c))
      ok = false;
  });
  return ok;
}

std::optional<uint32_t> dnnlBlocksStored(ThreadPool &pool, const kernels::GemmPlan &gemm,
                                         DType dtype, const void *a, const void *b, float *out) {
  std::atomic<bool> ok = true, finite = true;
  forEachBlock(pool, gemm, [&](const kernels::GemmBlock &block) {
    if (!kernels::gemmDnnlBlock(gemm, dtype, a, b, block, out))
      ok = false;
    else if (!blockFinite(gemm, block, out))
      finite = false;
  });
  if (!ok)
    return std::nullopt;
  return finite ? 0u : kFloatStatusOverflow;
}

} // namespace kiln::runtime
