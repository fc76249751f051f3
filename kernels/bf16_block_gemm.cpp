// See bf16_block_gemm.h. A block product of flash attention is a few
// microseconds of work: the primitive is made once per shape on each
// thread, and each call only wraps the pointers.
#include "kernels/bf16_block_gemm.h"

#include <map>
#include <tuple>

#include <omp.h>
#include <oneapi/dnnl/dnnl.hpp>

namespace kiln::kernels {
namespace {

using Shape = std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, bool, bool, bool,
                         float>; // m, n, k, lda, ldb, ldc, trans a, trans b, accumulate, alpha

struct Primitive {
  dnnl::memory::desc a, b, c;
  dnnl::matmul matmul;
};

struct ThreadState {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  std::map<Shape, Primitive> primitives;
  ThreadState() {
    // The caller's threads are the parallelism: oneDNN's OpenMP team on
    // this thread is one thread.
    omp_set_num_threads(1);
  }
};

dnnl::memory::desc matrix(int64_t rows, int64_t cols, dnnl::memory::data_type type, int64_t ld,
                          bool transposed) {
  return dnnl::memory::desc({rows, cols}, type,
                            transposed ? dnnl::memory::dims{1, ld} : dnnl::memory::dims{ld, 1});
}

} // namespace

bool bf16BlockGemm(int64_t m, int64_t n, int64_t k, float alpha, Bf16Operand a, Bf16Operand b,
                   bool accumulate, float *c, int64_t ldc) {
  using dt = dnnl::memory::data_type;
  thread_local ThreadState state;
  try {
    const Shape shape{m, n, k, a.ld, b.ld, ldc, a.transposed, b.transposed, accumulate, alpha};
    auto it = state.primitives.find(shape);
    if (it == state.primitives.end()) {
      Primitive p;
      p.a = matrix(m, k, dt::bf16, a.ld, a.transposed);
      p.b = matrix(k, n, dt::bf16, b.ld, b.transposed);
      p.c = matrix(m, n, dt::f32, ldc, false);
      dnnl::primitive_attr attr;
      if (alpha != 1.0f)
        attr.set_output_scales(0, {alpha});
      if (accumulate) {
        dnnl::post_ops ops;
        ops.append_sum(1.0f);
        attr.set_post_ops(ops);
      }
      const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(p.a, p.b, p.c), attr, state.engine);
      p.matmul = dnnl::matmul(pd);
      it = state.primitives.emplace(shape, std::move(p)).first;
    }
    const Primitive &p = it->second;
    p.matmul.execute(
        state.stream,
        {{DNNL_ARG_SRC, dnnl::memory(p.a, state.engine, const_cast<uint16_t *>(a.data))},
         {DNNL_ARG_WEIGHTS, dnnl::memory(p.b, state.engine, const_cast<uint16_t *>(b.data))},
         {DNNL_ARG_DST, dnnl::memory(p.c, state.engine, c)}});
    state.stream.wait();
    return true;
  } catch (const dnnl::error &) {
    return false;
  }
}

} // namespace kiln::kernels
