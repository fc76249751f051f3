// See block_gemm.h. A block product of flash attention is a few
// microseconds of work: the primitive is made once per shape on each
// thread, and each call only wraps the pointers.
#include "kernels/block_gemm.h"

#include <map>
#include <tuple>

#include <oneapi/dnnl/dnnl.hpp>

#include "kernels/gemm.h"

namespace kiln::kernels {
namespace {

// dtype, m, n, k, lda, ldb, ldc, trans a, trans b, accumulate, alpha
using Shape = std::tuple<DType, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, bool, bool,
                         bool, float>;

// The matmul and its operands' memory objects, made once; a call only
// points them at its data.
struct Primitive {
  dnnl::memory a, b, c;
  dnnl::matmul matmul;
};

struct ThreadState {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  std::map<Shape, Primitive> primitives;
  ThreadState() {
    keepOneDnnOnThisThread(); // the caller's threads are the parallelism
  }
};

dnnl::memory::desc matrix(int64_t rows, int64_t cols, dnnl::memory::data_type type, int64_t ld,
                          bool transposed) {
  return dnnl::memory::desc({rows, cols}, type,
                            transposed ? dnnl::memory::dims{1, ld} : dnnl::memory::dims{ld, 1});
}

} // namespace

bool blockGemm(DType dtype, int64_t m, int64_t n, int64_t k, float alpha, BlockOperand a,
               BlockOperand b, bool accumulate, float *c, int64_t ldc) {
  using dt = dnnl::memory::data_type;
  if (dtype != DType::BF16 && dtype != DType::F32)
    return false;
  const dt type = dtype == DType::BF16 ? dt::bf16 : dt::f32;
  thread_local ThreadState state;
  try {
    const Shape shape{dtype,        m,          n,    k, a.ld, b.ld, ldc, a.transposed,
                      b.transposed, accumulate, alpha};
    auto it = state.primitives.find(shape);
    if (it == state.primitives.end()) {
      const dnnl::memory::desc ad = matrix(m, k, type, a.ld, a.transposed);
      const dnnl::memory::desc bd = matrix(k, n, type, b.ld, b.transposed);
      const dnnl::memory::desc cd = matrix(m, n, dt::f32, ldc, false);
      Primitive p;
      p.a = dnnl::memory(ad, state.engine, DNNL_MEMORY_NONE);
      p.b = dnnl::memory(bd, state.engine, DNNL_MEMORY_NONE);
      p.c = dnnl::memory(cd, state.engine, DNNL_MEMORY_NONE);
      dnnl::primitive_attr attr;
      if (alpha != 1.0f)
        attr.set_output_scales(0, {alpha});
      if (accumulate) {
        dnnl::post_ops ops;
        ops.append_sum(1.0f);
        attr.set_post_ops(ops);
      }
      const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(ad, bd, cd), attr, state.engine);
      p.matmul = dnnl::matmul(pd);
      it = state.primitives.emplace(shape, std::move(p)).first;
    }
    Primitive &p = it->second;
    p.a.set_data_handle(const_cast<void *>(a.data));
    p.b.set_data_handle(const_cast<void *>(b.data));
    p.c.set_data_handle(c);
    p.matmul.execute(state.stream,
                     {{DNNL_ARG_SRC, p.a}, {DNNL_ARG_WEIGHTS, p.b}, {DNNL_ARG_DST, p.c}});
    state.stream.wait();
    return true;
  } catch (const dnnl::error &) {
    return false;
  }
}

} // namespace kiln::kernels
