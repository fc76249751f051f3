// MatMul (2-D, optional bias) and BatchMatMul (batched over equal leading axes):
// op(a) @ op(b) with op = transpose per flag, accumulated in double, rounded once
// to the output dtype: the inputs' dtype, or f32 with fp32_out.
#include <algorithm>
#include <cassert>
#include <string>
#include <vector>

#include "ops/kernel_util.h"
#include "ops/op_builder.h"
#include "ops/op_registry.h"

namespace kiln::ops {
namespace {

// The problem sizes of one (batched) matmul: C[batch, m, n] = op(A)[m, k] op(B)[k, n].
struct MatMulDims {
  Shape batch;
  int64_t m = 0, k = 0, n = 0;
};

std::string flagsText(const char *op, const TensorType &a, const TensorType &b, bool ta, bool tb) {
  return std::string(op) + " a " + typeToString(a) + " (transpose_a=" + (ta ? "true" : "false") +
         ") and b " + typeToString(b) + " (transpose_b=" + (tb ? "true" : "false") + ")";
}

// Checks ranks, dtypes, batch and contraction dims; `batched` selects BatchMatMul's rules.
Expected<MatMulDims> matmulDims(const char *op, const TensorType &a, const TensorType &b, bool ta,
                                bool tb, bool batched) {
  if (batched) {
    if (a.rank() < 3 || b.rank() < 3)
      return Error(std::string(op) + " needs operands of rank 3 or more, got a " + typeToString(a) +
                   " and b " + typeToString(b) + "; use MatMul for 2-D");
    if (a.rank() != b.rank())
      return Error(std::string(op) + " needs operands of one rank, got a " + typeToString(a) +
                   " and b " + typeToString(b));
  } else if (a.rank() != 2 || b.rank() != 2) {
    return Error(std::string(op) + " needs 2-D operands, got a " + typeToString(a) + " and b " +
                 typeToString(b) + "; use BatchMatMul for batched operands");
  }
  KILN_RETURN_IF_ERROR(requireSameDType({a, b}, std::string(op) + " operands a and b"));
  const size_t r = a.shape.size();
  MatMulDims d;
  d.batch.assign(a.shape.begin(), a.shape.end() - 2);
  if (!std::equal(d.batch.begin(), d.batch.end(), b.shape.begin()))
    return Error(flagsText(op, a, b, ta, tb) + " have different batch dims " +
                 shapeToString(d.batch) + " and " +
                 shapeToString(Shape(b.shape.begin(), b.shape.end() - 2)));
  d.m = ta ? a.shape[r - 1] : a.shape[r - 2];
  d.k = ta ? a.shape[r - 2] : a.shape[r - 1];
  const int64_t kb = tb ? b.shape[r - 1] : b.shape[r - 2];
  d.n = tb ? b.shape[r - 2] : b.shape[r - 1];
  if (d.k != kb)
    return Error(flagsText(op, a, b, ta, tb) + " do not contract: op(a) has " +
                 std::to_string(d.k) + " columns but op(b) has " + std::to_string(kb) + " rows");
  return d;
}

Expected<std::vector<TensorType>> inferMatMulImpl(const char *op, const std::vector<TensorType> &in,
                                                  const AttrMap &attrs, bool batched) {
  const bool ta = attrs.getBool("transpose_a"), tb = attrs.getBool("transpose_b");
  KILN_ASSIGN_OR_RETURN(MatMulDims d, matmulDims(op, in[0], in[1], ta, tb, batched));
  if (in.size() > 2) {
    const TensorType &bias = in[2];
    if (bias.rank() != 1 || bias.shape[0] != d.n)
      return Error(std::string(op) + " bias must be 1-D of length N = " + std::to_string(d.n) +
                   " (the output's columns), got " + typeToString(bias));
  }
  Shape out = d.batch;
  out.push_back(d.m);
  out.push_back(d.n);
  // fp32_out stores the f32 accumulator as it is (CANN's cube_fp16in_fp32out).
  const DType out_dtype = attrs.getBool("fp32_out") ? DType::F32 : in[0].dtype;
  return std::vector<TensorType>{{out_dtype, out}};
}

Expected<std::vector<TensorType>> inferMatMul(const std::vector<TensorType> &in,
                                              const AttrMap &attrs) {
  return inferMatMulImpl("MatMul", in, attrs, false);
}

Expected<std::vector<TensorType>> inferBatchMatMul(const std::vector<TensorType> &in,
                                                   const AttrMap &attrs) {
  return inferMatMulImpl("BatchMatMul", in, attrs, true);
}

std::vector<double> toDoubles(const Tensor &t) {
  std::vector<double> v(t.numElements());
  for (int64_t i = 0; i < t.numElements(); ++i)
    v[i] = t.getFloat(i);
  return v;
}

Status matmulKernelImpl(const KernelContext &ctx, const std::vector<const Tensor *> &in,
                        std::vector<Tensor> &out, const AttrMap &attrs, bool batched) {
  const bool ta = attrs.getBool("transpose_a"), tb = attrs.getBool("transpose_b");
  auto dims =
      matmulDims(batched ? "BatchMatMul" : "MatMul", in[0]->type(), in[1]->type(), ta, tb, batched);
  assert(dims && "shape inference accepted these operands");
  const int64_t m = dims->m, k = dims->k, n = dims->n;
  const int64_t batches = numElements(dims->batch);
  const std::vector<double> a = toDoubles(*in[0]), b = toDoubles(*in[1]);
  std::vector<double> bias(n, 0.0);
  if (in.size() > 2)
    bias = toDoubles(*in[2]);
  // c arrives with the inferred dtype, so setFloat is the one rounding: to the
  // inputs' dtype, or to f32 with fp32_out.
  Tensor &c = out[0];
  assert(c.dtype() == (attrs.getBool("fp32_out") ? DType::F32 : in[0]->dtype()));
  for (int64_t batch = 0; batch < batches; ++batch) {
    const double *pa = a.data() + batch * m * k;
    const double *pb = b.data() + batch * k * n;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double acc = 0;
        for (int64_t p = 0; p < k; ++p)
          acc += (ta ? pa[p * m + i] : pa[i * k + p]) * (tb ? pb[j * k + p] : pb[p * n + j]);
        c.setFloat((batch * m + i) * n + j, static_cast<float>(acc + bias[j]), ctx.overflow);
      }
  }
  return Status::ok();
}

Status matmulKernel(const KernelContext &ctx, const std::vector<const Tensor *> &in,
                    std::vector<Tensor> &out, const AttrMap &attrs) {
  return matmulKernelImpl(ctx, in, out, attrs, false);
}

Status batchMatmulKernel(const KernelContext &ctx, const std::vector<const Tensor *> &in,
                         std::vector<Tensor> &out, const AttrMap &attrs) {
  return matmulKernelImpl(ctx, in, out, attrs, true);
}

// dA and dB of C = op(A) op(B) as matmuls with flags, never explicit transposes:
//   NN: dA = dC B^T,    dB = A^T dC      NT: dA = dC B,       dB = dC^T A
//   TN: dA = B dC^T,    dB = A dC        TT: dA = B^T dC^T,   dB = dC^T A^T
//
// With fp32_out dC is f32 while A and B are f16/bf16. The cube multiplies two
// operands of one dtype, so for dA = dC B^T with B in f16 the NPU feeds it dC
// cast to f16: the rule casts dC to the operands' dtype once and the gradient
// matmuls (fp32_out off) round their f32 sums once to that dtype, which is
// the dtype of the gradients of A and B. fp32_out on them plus a Cast of the
// results would round twice for the same inputs.
Expected<std::vector<ValueId>> gradMatMulImpl(GradContext &ctx, const char *op) {
  OpBuilder &b = ctx.builder;
  std::vector<ValueId> grads(ctx.node.inputs.size(), kNoValue);
  const ValueId dc_in = ctx.output_grads[0];
  if (dc_in == kNoValue)
    return grads;
  const ValueId x = ctx.input(0), y = ctx.input(1);
  const bool ta = ctx.attrs().getBool("transpose_a"), tb = ctx.attrs().getBool("transpose_b");
  ValueId dc = dc_in;
  if (b.dtype(dc) != b.dtype(x))
    dc = b.create("Cast", "dc", {dc}, {{"dtype", b.dtype(x)}});
  auto mm = [&](const char *name, ValueId lhs, ValueId rhs, bool t_lhs, bool t_rhs) {
    return b.create(op, name, {lhs, rhs},
                    {{"transpose_a", t_lhs}, {"transpose_b", t_rhs}, {"fp32_out", false}});
  };
  if (!ta && !tb) {
    grads[0] = mm("da", dc, y, false, true);
    grads[1] = mm("db", x, dc, true, false);
  } else if (!ta && tb) {
    grads[0] = mm("da", dc, y, false, false);
    grads[1] = mm("db", dc, x, true, false);
  } else if (ta && !tb) {
    grads[0] = mm("da", y, dc, false, true);
    grads[1] = mm("db", x, dc, false, false);
  } else {
    grads[0] = mm("da", y, dc, true, true);
    grads[1] = mm("db", dc, x, true, true);
  }
  if (ctx.node.inputs.size() > 2) {
    // The bias gradient is a sum on the vector unit, not a cube input: it reads
    // the incoming gradient as it is (f32 with fp32_out) and rounds to the
    // bias's dtype at the end.
    const ValueId bias = ctx.input(2);
    ValueId dbias = b.create("SumToShape", "dbias", {dc_in}, {{"shape", b.shape(bias)}});
    if (b.dtype(bias) != b.dtype(dbias))
      dbias = b.create("Cast", "dbias_cast", {dbias}, {{"dtype", b.dtype(bias)}});
    grads[2] = dbias;
  }
  KILN_RETURN_IF_ERROR(b.status());
  return grads;
}

Expected<std::vector<ValueId>> gradMatMul(GradContext &ctx) {
  return gradMatMulImpl(ctx, "MatMul");
}

Expected<std::vector<ValueId>> gradBatchMatMul(GradContext &ctx) {
  return gradMatMulImpl(ctx, "BatchMatMul");
}

} // namespace

KILN_REGISTER_OP("MatMul", OpImpl{inferMatMul, gradMatMul, matmulKernel});
KILN_REGISTER_OP("BatchMatMul", OpImpl{inferBatchMatMul, gradBatchMatMul, batchMatmulKernel});

} // namespace kiln::ops
