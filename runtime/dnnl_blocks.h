// A whole GEMM on oneDNN over the thread pool, one single-threaded block per
// thread (the executor's matmul kernels with f32 or bf16 operands).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>

#include "ir/dtype.h"
#include "kernels/gemm.h"
#include "support/thread_pool.h"

namespace kiln::runtime {

// c = op(a) op(b), [batch, m, n] f32, row-major: a single matmul by blocks
// of rows when it has at least as many rows as columns, else by blocks of
// columns (oneDNN's bf16 and f32 kernels run 5-10 % faster on the longer
// side's halves of Qwen's projections, docs/performance.md), a batch by
// blocks of whole matrices. False when oneDNN cannot run the shape.
bool dnnlBlocks(ThreadPool &pool, const kernels::GemmPlan &gemm, DType dtype, const void *a,
                const void *b, float *c);

// dnnlBlocks, each block followed in the same task (on pool worker
// `worker`, while the block is hot) by then(block, worker); a block oneDNN
// cannot run is not followed.
bool dnnlBlocksThen(ThreadPool &pool, const kernels::GemmPlan &gemm, DType dtype, const void *a,
                    const void *b, float *c,
                    const std::function<void(const kernels::GemmBlock &, int)> &then);

// The same into a kernel's f32 output, each block then checked while it is
// hot for what the kernel's store would have flagged (inf or NaN): the
// kernel's float status, or nullopt when oneDNN cannot run the shape.
std::optional<uint32_t> dnnlBlocksStored(ThreadPool &pool, const kernels::GemmPlan &gemm,
                                         DType dtype, const void *a, const void *b, float *out);

} // namespace kiln::runtime
