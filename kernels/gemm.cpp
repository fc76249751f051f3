#include "kernels/gemm.h"

#include <algorithm>
#include <cstdlib>
#include <string_view>

#include <cblas.h>
#include <dlfcn.h>
#include <oneapi/dnnl/dnnl.hpp>

#include "ir/float16.h"

namespace kiln::kernels {
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

void gemmBlock(const GemmPlan &plan, const GemmOperands &operands, int64_t row_begin,
               int64_t row_end, int64_t col_begin, int64_t col_end, float *c, int64_t ldc) {
  const int64_t m = plan.m, n = plan.n, k = plan.k, cols = col_end - col_begin;
  if (cols <= 0)
    return;
  for (int64_t r = row_begin; r < row_end;) {
    const int64_t batch = r / m;
    const int64_t first = r % m;
    const int64_t rows = std::min(row_end - r, m - first);
    const float *a = operands.a() + batch * m * k;
    const float *b = operands.b() + batch * k * n;
    // op(A) rows [first, first + rows): rows of A, or columns of a transposed A.
    const float *a_rows = plan.transpose_a ? a + first : a + first * k;
    // op(B) columns [col_begin, col_end): columns of B, or rows of a transposed B.
    const float *b_cols = plan.transpose_b ? b + col_begin * k : b + col_begin;
    const int lda = static_cast<int>(plan.transpose_a ? m : k);
    const int ldb = static_cast<int>(plan.transpose_b ? k : n);
    float *c_rows = c + (r - row_begin) * ldc;
    if (k == 0) {
      for (int64_t i = 0; i < rows; ++i)
        std::fill(c_rows + i * ldc, c_rows + i * ldc + cols, 0.0f);
    } else {
      cblas_sgemm(CblasRowMajor, plan.transpose_a ? CblasTrans : CblasNoTrans,
                  plan.transpose_b ? CblasTrans : CblasNoTrans, static_cast<int>(rows),
                  static_cast<int>(cols), static_cast<int>(k), 1.0f, a_rows, lda, b_cols, ldb, 0.0f,
                  c_rows, static_cast<int>(ldc));
    }
    r += rows;
  }
}

void gemmRows(const GemmPlan &plan, const GemmOperands &operands, int64_t row_begin,
              int64_t row_end, float *c) {
  gemmBlock(plan, operands, row_begin, row_end, 0, plan.n, c, plan.n);
}

bool hostHasBf16Gemm() {
  static const bool available = [] {
    const char *off = std::getenv("KILN_BF16_GEMM");
    if (off && std::string_view(off) == "0")
      return false;
    return static_cast<unsigned>(dnnl::get_effective_cpu_isa()) >=
           static_cast<unsigned>(dnnl::cpu_isa::avx512_core_bf16);
  }();
  return available;
}

bool gemmDnnlBlock(const GemmPlan &plan, DType dtype, const void *a, const void *b,
                   const GemmBlock &block, float *c) {
  using dims = dnnl::memory::dims;
  using dt = dnnl::memory::data_type;
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  if (dtype != DType::BF16 && dtype != DType::F32)
    return false;
  const int64_t m = plan.m, n = plan.n, k = plan.k;
  const int64_t batch = block.batch_end - block.batch_begin;
  const int64_t rows = block.row_end - block.row_begin, cols = block.col_end - block.col_begin;
  if (batch <= 0 || rows <= 0 || cols <= 0)
    return true;
  keepOneDnnOnThisThread();
  const int64_t element = dtype == DType::BF16 ? 2 : 4;
  // op(A) rows [row_begin, row_end): rows of A, or columns of a transposed A;
  // op(B) columns [col_begin, col_end): columns of B, or rows of a transposed B.
  const auto *a_bytes =
      static_cast<const uint8_t *>(a) +
      (block.batch_begin * m * k + (plan.transpose_a ? block.row_begin : block.row_begin * k)) *
          element;
  const auto *b_bytes =
      static_cast<const uint8_t *>(b) +
      (block.batch_begin * k * n + (plan.transpose_b ? block.col_begin * k : block.col_begin)) *
          element;
  const dt type = dtype == DType::BF16 ? dt::bf16 : dt::f32;
  try {
    // Transposes are strides: A [m, k] stored as [k, m], B [k, n] as [n, k].
    const dnnl::memory::desc a_md({batch, rows, k}, type,
                                  plan.transpose_a ? dims{m * k, 1, m} : dims{m * k, k, 1});
    const dnnl::memory::desc b_md({batch, k, cols}, type,
                                  plan.transpose_b ? dims{k * n, 1, k} : dims{k * n, n, 1});
    const dnnl::memory::desc c_md({batch, rows, cols}, dt::f32, dims{m * n, n, 1});
    // oneDNN keeps created primitives in its cache: a shape seen before is
    // not compiled again.
    const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a_md, b_md, c_md), engine);
    dnnl::stream stream(engine);
    float *c_block = c + block.batch_begin * m * n + block.row_begin * n + block.col_begin;
    dnnl::matmul(pd).execute(
        stream, {{DNNL_ARG_SRC, dnnl::memory(a_md, engine, const_cast<uint8_t *>(a_bytes))},
                 {DNNL_ARG_WEIGHTS, dnnl::memory(b_md, engine, const_cast<uint8_t *>(b_bytes))},
                 {DNNL_ARG_DST, dnnl::memory(c_md, engine, c_block)}});
    stream.wait();
    return true;
  } catch (const dnnl::error &) {
    return false;
  }
}

bool gemmBf16(const GemmPlan &plan, const void *a, const void *b, float *c) {
  return gemmDnnlBlock(plan, DType::BF16, a, b, {0, plan.batch, 0, plan.m, 0, plan.n}, c);
}

void useSingleThreadedBlas() { openblas_set_num_threads(1); }

void keepOneDnnOnThisThread() {
  // oneDNN's OpenMP runtime (libgomp, loaded with libdnnl) looked up at run
  // time: kiln itself is not built with OpenMP, which clang's builds (the
  // fuzzers) would need another runtime's headers for. The setting is the
  // calling thread's own.
  using SetThreads = void (*)(int);
  static const auto set = reinterpret_cast<SetThreads>(dlsym(RTLD_DEFAULT, "omp_set_num_threads"));
  if (set)
    set(1);
}

} // namespace kiln::kernels
