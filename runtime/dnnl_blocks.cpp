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
                  const std::function<void(const kernels::GemmBlock &, int)> &block) {
  const int64_t threads = pool.size();
  if (gemm.batch > 1) {
    const int64_t blocks = std::min<int64_t>(gemm.batch, threads);
    pool.parallelFor(blocks, [&](int64_t t, int worker) {
      block({gemm.batch * t / blocks, gemm.batch * (t + 1) / blocks, 0, gemm.m, 0, gemm.n}, worker);
    });
  } else if (gemm.m >= gemm.n) {
    const int64_t height = ((gemm.m + threads - 1) / threads + 15) / 16 * 16;
    pool.parallelFor(threads, [&](int64_t t, int worker) {
      const int64_t r0 = std::min(gemm.m, t * height);
      block({0, 1, r0, std::min(gemm.m, r0 + height), 0, gemm.n}, worker);
    });
  } else {
    const int64_t width = ((gemm.n + threads - 1) / threads + 15) / 16 * 16;
    pool.parallelFor(threads, [&](int64_t t, int worker) {
      const int64_t c0 = std::min(gemm.n, t * width);
      block({0, 1, 0, gemm.m, c0, std::min(gemm.n, c0 + width)}, worker);
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

bool dnnlBlocksThen(ThreadPool &pool, const kernels::GemmPlan &gemm, DType dtype, const void *a,
                    const void *b, float *c,
                    const std::function<void(const kernels::GemmBlock &, int)> &then) {
  std::atomic<bool> ok = true;
  forEachBlock(pool, gemm, [&](const kernels::GemmBlock &block, int worker) {
    if (!kernels::gemmDnnlBlock(gemm, dtype, a, b, block, c))
      ok = false;
    else if (then)
      then(block, worker);
  });
  return ok;
}

bool dnnlBlocks(ThreadPool &pool, const kernels::GemmPlan &gemm, DType dtype, const void *a,
                const void *b, float *c) {
  return dnnlBlocksThen(pool, gemm, dtype, a, b, c, nullptr);
}

std::optional<uint32_t> dnnlBlocksStored(ThreadPool &pool, const kernels::GemmPlan &gemm,
                                         DType dtype, const void *a, const void *b, float *out) {
  std::atomic<bool> finite = true;
  if (!dnnlBlocksThen(pool, gemm, dtype, a, b, out, [&](const kernels::GemmBlock &block, int) {
        if (!blockFinite(gemm, block, out))
          finite = false;
      }))
    return std::nullopt;
  return finite ? 0u : kFloatStatusOverflow;
}

} // namespace kiln::runtime
