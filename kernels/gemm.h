// The GEMM half of a matmul kernel, on a tuned BLAS (OpenBLAS's cblas_sgemm;
// see docs/notes/gemm-backend.md for the measurements behind the choice).
// The cube unit takes f16/bf16 operands and accumulates in f32; here 16-bit
// operands are widened exactly to f32 once per launch and multiplied in f32,
// or, for bf16 on a host with bf16 units, multiplied by oneDNN's bf16 kernel
// with f32 accumulation (the products of two bf16 values are exact in f32).
#pragma once

#include <cstdint>
#include <vector>

#include "ir/dtype.h"
#include "ir/graph.h"

namespace kiln::kernels {

// c[b] = op(a[b]) @ op(b[b]) for each of `batch` matrices, in f32: the GEMM
// half of a matmul kernel, as the code generator plans it (kernel_builder.h).
struct GemmPlan {
  int a_input = 0; // kernel input indices of the operands
  int b_input = 0;
  bool transpose_a = false;
  bool transpose_b = false;
  int64_t batch = 1, m = 0, n = 0, k = 0;
  NodeId node = kNoNode; // the MatMul in the graph
};

// The operands of one launch as f32 (borrowed when they are f32 already).
class GemmOperands {
public:
  GemmOperands(const GemmPlan &plan, const void *a, DType a_dtype, const void *b, DType b_dtype);
  const float *a() const { return a_; }
  const float *b() const { return b_; }

private:
  std::vector<float> a_copy_, b_copy_;
  const float *a_ = nullptr;
  const float *b_ = nullptr;
};

// Rows [row_begin, row_end) of the result, counted over all batches
// (row r is row r % m of batch r / m), into `c` ([rows, n], f32, row-major).
void gemmRows(const GemmPlan &plan, const GemmOperands &operands, int64_t row_begin,
              int64_t row_end, float *c);

// Rows [row_begin, row_end) and columns [col_begin, col_end) of the result
// into `c`, which points at element (row_begin, col_begin) of a row-major
// matrix with `ldc` elements per row. Splitting a large matmul by columns,
// one block per thread, packs each part of the weight once.
void gemmBlock(const GemmPlan &plan, const GemmOperands &operands, int64_t row_begin,
               int64_t row_end, int64_t col_begin, int64_t col_end, float *c, int64_t ldc);

// Whether bf16 x bf16 matmuls run on the host's bf16 units: oneDNN finds
// AVX512-BF16 or AMX, and KILN_BF16_GEMM=0 is not set.
bool hostHasBf16Gemm();

// A block of a matmul's result: batches [batch_begin, batch_end), and of
// each of their matrices rows [row_begin, row_end) and columns [col_begin,
// col_end).
struct GemmBlock {
  int64_t batch_begin = 0, batch_end = 1;
  int64_t row_begin = 0, row_end = 0;
  int64_t col_begin = 0, col_end = 0;
};

// The block `block` of a matmul whose operands are both `dtype` (BF16 or
// F32) into `c`, the whole [batch * m, n] f32 result (row-major), on
// oneDNN's kernels, f32 accumulation, on the calling thread alone: the
// caller runs blocks on its own threads. A block's bits depend on its
// rows and columns (oneDNN blocks k by them), not on the thread that runs
// it. False when oneDNN cannot run it; the caller then falls back to sgemm.
bool gemmDnnlBlock(const GemmPlan &plan, DType dtype, const void *a, const void *b,
                   const GemmBlock &block, float *c);

// A matmul of two bf16 operands, every batch, whole, into `c` ([batch * m,
// n], f32, row-major) on oneDNN's bf16 kernel on the calling thread.
bool gemmBf16(const GemmPlan &plan, const void *a, const void *b, float *c);

// Makes the BLAS single-threaded: kiln's executor runs tiles in parallel itself.
void useSingleThreadedBlas();

// Makes oneDNN run its calls from this thread on this thread alone: its
// OpenMP threads would otherwise keep spinning on the cores after a call,
// where the executor's pool runs the next kernels.
void keepOneDnnOnThisThread();

} // namespace kiln::kernels
