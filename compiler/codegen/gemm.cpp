#include "compiler/codegen/gemm.h"

#include <algorithm>

#include <cblas.h>

#include "ir/float16.h"

namespace kiln::codegen {
namespace {

const float *widen(const void *data, DType dtype, int64_t count, std::vector<float> &copy) {
  if (dtype == DType::F32)
    return static_cast<const float *>(data);
  copy.resize(static_cast<size_t>(count));
  const auto *bits = static_cast<const uint16_t *>(data);
  if (dtype == DType::F16)
    std::transform(bits, bits + count, copy.begin(), halfToFloat);
  else
    std::transform(bits, bits + count, copy.begin(), bfloat16ToFloat);
  return copy.data();
}

} // namespace

GemmOperands::GemmOperands(const GemmPlan &plan, const void *a, DType a_dtype, const void *b,
                           DType b_dtype) {
  a_ = widen(a, a_dtype, plan.batch * plan.m * plan.k, a_copy_);
  b_ = widen(b, b_dtype, plan.batch * plan.k * plan.n, b_copy_);
}

void gemmRows(const GemmPlan &plan, const GemmOperands &operands, int64_t row_begin,
              int64_t row_end, float *c) {
  const int64_t m = plan.m, n = plan.n, k = plan.k;
  for (int64_t r = row_begin; r < row_end;) {
    const int64_t batch = r / m;
    const int64_t first = r % m;
    const int64_t rows = std::min(row_end - r, m - first);
    const float *a = operands.a() + batch * m * k;
    const float *b = operands.b() + batch * k * n;
    // op(A) rows [first, first + rows): rows of A, or columns of a transposed A.
    const float *a_rows = plan.transpose_a ? a + first : a + first * k;
    const int lda = static_cast<int>(plan.transpose_a ? m : k);
    const int ldb = static_cast<int>(plan.transpose_b ? k : n);
    float *c_rows = c + (r - row_begin) * n;
    if (k == 0)
      std::fill(c_rows, c_rows + rows * n, 0.0f);
    else
      cblas_sgemm(CblasRowMajor, plan.transpose_a ? CblasTrans : CblasNoTrans,
                  plan.transpose_b ? CblasTrans : CblasNoTrans, static_cast<int>(rows),
                  static_cast<int>(n), static_cast<int>(k), 1.0f, a_rows, lda, b, ldb, 0.0f, c_rows,
                  static_cast<int>(n));
    r += rows;
  }
}

void gemmAll(const GemmPlan &plan, const GemmOperands &operands, float *c, int threads) {
  openblas_set_num_threads(threads);
  gemmRows(plan, operands, 0, plan.batch * plan.m, c);
  openblas_set_num_threads(1);
}

void useSingleThreadedBlas() { openblas_set_num_threads(1); }

} // namespace kiln::codegen
