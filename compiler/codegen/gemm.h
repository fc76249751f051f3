// The GEMM half of a matmul kernel, on a tuned BLAS (OpenBLAS's cblas_sgemm;
// see docs/notes/gemm-backend.md for the measurements behind the choice).
// The cube unit takes f16/bf16 operands and accumulates in f32; here 16-bit
// operands are widened exactly to f32 once per launch and multiplied in f32.
#pragma once

#include <cstdint>
#include <vector>

#include "compiler/codegen/kernel_builder.h"
#include "ir/dtype.h"

namespace kiln::codegen {

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

// The whole result, every batch, into `c` ([batch * m, n]), each batch one
// BLAS call on `threads` of the BLAS's own threads: one large call keeps the
// weight packed once (docs/notes/gemm-backend.md). The BLAS is
// single-threaded again afterwards.
void gemmAll(const GemmPlan &plan, const GemmOperands &operands, float *c, int threads);

// Makes the BLAS single-threaded: kiln's executor runs tiles in parallel itself.
void useSingleThreadedBlas();

} // namespace kiln::codegen
