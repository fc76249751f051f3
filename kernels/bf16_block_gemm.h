// Small bf16 x bf16 -> f32 matrix products on the calling thread, for host
// routines that tile their work themselves (flash attention's blocks): the
// products of two bf16 values are exact in f32 and summed in f32, as the
// cube accumulates. oneDNN's bf16 kernel, its primitive made once per shape
// and thread; only where the host has bf16 units (gemm.h's hostHasBf16Gemm).
#pragma once

#include <cstdint>

namespace kiln::kernels {

// One operand: row-major bf16 bits, `ld` elements between rows, read
// transposed when `transposed`.
struct Bf16Operand {
  const uint16_t *data;
  int64_t ld;
  bool transposed = false;
};

// c [m, n] (f32, ldc elements a row) = alpha * op(a) [m, k] op(b) [k, n]
// (+ c when `accumulate`). False when oneDNN cannot run it; the caller then
// computes it another way.
bool bf16BlockGemm(int64_t m, int64_t n, int64_t k, float alpha, Bf16Operand a, Bf16Operand b,
                   bool accumulate, float *c, int64_t ldc);

} // namespace kiln::kernels
