// Host routines a generated kernel calls for its rows instead of computing
// them itself: for ops whose loop form does far more work than a direct
// routine. EmbeddingGrad written as a gather sums, for every table row, over
// every token (vocab x tokens x hidden steps); the routine scatter-adds each
// token's row once (tokens x hidden). The kernel object is then a small
// function that calls the routine, so caching, artifacts and the executor
// treat it as any other kernel.
//
// A routine is a LibraryRoutine (kernel_abi.h): it gets the kernel's buffers
// (inputs, then stored outputs), its rows and its float-status word as the
// kernel got them, and `args`: the
// lowering's (KernelProgram::library_args) followed by the kernel's overflow
// mode. It rounds as the generated kernels do and raises the status where
// they would.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/kernel_abi.h"

namespace kiln::kernels {

struct LibraryKernel {
  std::string symbol;
  LibraryRoutine routine;
};

// Every routine, for the kernel loader to resolve.
const std::vector<LibraryKernel> &libraryKernels();

// dtable[v, :] = sum over tokens p in order with indices[p] == v of dy[p, :],
// in f32, rounded once to dtable's dtype; an index outside the table matches
// no row. args: dy buffer, indices buffer, dtable buffer, the dtypes of dy,
// indices and dtable (DType), tokens, elements per row.
inline constexpr char kEmbeddingGradRoutine[] = "kiln_embedding_grad";

// y = dropout(x) of a [rows, cols] tensor (ops/lib/dropout.cpp): each element
// kept by ir/dropout_mask.h's hash and scaled in f32, or zero, rounded to y's
// dtype. The hash has no form in kernel expressions (no xor or shifts).
// args: x buffer, seed buffer (i64 scalar), y buffer, the dtypes of x and y,
// cols, p (a double's bits), stream.
inline constexpr char kDropoutRoutine[] = "kiln_dropout";

// FlashAttentionScore (ops/defs/nn.xml): for each head (b, n), each block
// of query rows against the keys it sees in one pass (FlashAttention-2's
// online softmax), the probabilities rounded to the compute dtype times v,
// in f32. The kernel's rows are (b, n) in BNSD, (b, s) in BSND; a launch's
// rows [begin, end) of R take heads [ceil(begin H / R), ceil(end H / R)) of
// H = B N, so the tiles take every head once. args: q, k, v buffers, out,
// softmax_max, softmax_sum slots (-1 for a statistic the kernel does not
// store), the dtype, B, N, Nkv, S, D, scale (a double's bits), causal, the
// layout (ops::AttentionLayout), R.
inline constexpr char kFlashAttentionRoutine[] = "kiln_flash_attention";

// FlashAttentionScoreGrad: dq, dk and dv, each element's sum accumulated in
// f32 from probabilities recomputed from q, k and the saved statistics. The
// units are the key/value heads (b, kv) with their query heads, spread over
// the kernel's rows as above: (b, n) of BNSD when every query head has its
// own key/value head, batches b when not, (b, s) of BSND.
// args: q, k, v, out, dout, softmax_max, softmax_sum buffers, dq, dk, dv
// slots, the dtype, B, N, Nkv, S, D, scale (a double's bits), causal, the
// layout, R.
inline constexpr char kFlashAttentionGradRoutine[] = "kiln_flash_attention_grad";

} // namespace kiln::kernels
