// Small matrix products on the calling thread, for host routines that tile
// their work themselves (flash attention's blocks): bf16 x bf16 or f32 x f32
// into f32, on oneDNN (its primitive made once per shape and thread). bf16
// products are exact in f32 and summed in f32, as the cube accumulates; use
// them only where the host has bf16 units (gemm.h's hostHasBf16Gemm).
#pragma once

#include <cstdint>

#include "ir/dtype.h"

namespace kiln::kernels {

// One operand: row-major elements of the product's dtype, `ld` of them
// between rows, read transposed when `transposed`.
struct BlockOperand {
  const void *data;
  int64_t ld;
  bool transposed = false;
};

// c [m, n] (f32, ldc elements a row) = alpha * op(a) [m, k] op(b) [k, n]
// (+ c when `accumulate`), a and b of `dtype` (BF16 or F32). False when
// oneDNN cannot run it; the caller then computes it another way.
bool blockGemm(DType dtype, int64_t m, int64_t n, int64_t k, float alpha, BlockOperand a,
               BlockOperand b, bool accumulate, float *c, int64_t ldc);

} // namespace kiln::kernels
