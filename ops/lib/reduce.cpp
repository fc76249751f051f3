// ReduceSum, ReduceMean, ReduceMax and ReduceMin over a set of axes (all axes
// when empty), accumulated in double.
#include <algorithm>
#include <cmath>

#include "ops/kernel_util.h"
#include "ops/op_builder.h"
#include "ops/op_registry.h"

namespace kiln::ops {
namespace {

// The input shape with each reduced axis set to 1; `reduced` counts the
// elements that fold into one output element.
struct Reduction {
  Shape keep_shape;
  Shape out_shape;
  int64_t reduced = 1;
};

Expected<Reduction> planReduction(const TensorType &x, const AttrMap &attrs) {
  const std::vector<int64_t> &axes = attrs.getInts("axes");
  const int64_t rank = x.rank();
  std::vector<bool> reduce(rank, axes.empty());
  for (int64_t axis : axes) {
    auto a = normalizeAxis(axis, rank);
    if (!a || rank == 0)
      return Error("axes " + shapeToString(axes) + ": axis " + std::to_string(axis) +
                   " is out of range for the input " + typeToString(x));
    if (reduce[*a])
      return Error("axes " + shapeToString(axes) + " names axis " + std::to_string(*a) +
                   " twice; each axis may be reduced once");
    reduce[*a] = true;
  }
  Reduction r;
  const bool keepdims = attrs.getBool("keepdims");
  for (int64_t a = 0; a < rank; ++a) {
    r.keep_shape.push_back(reduce[a] ? 1 : x.shape[a]);
    if (reduce[a])
      r.reduced *= x.shape[a];
    if (!reduce[a] || keepdims)
      r.out_shape.push_back(r.keep_shape.back());
  }
  return r;
}

Expected<std::vector<TensorType>> inferReduce(const std::vector<TensorType> &in,
                                              const AttrMap &attrs) {
  KILN_ASSIGN_OR_RETURN(Reduction r, planReduction(in[0], attrs));
  return std::vector<TensorType>{{in[0].dtype, r.out_shape}};
}

// dx = broadcast(dy reshaped to the keepdims shape) [* 1/n for the mean].
Expected<std::vector<ValueId>> gradReduce(GradContext &ctx, bool mean) {
  ValueId dy = ctx.output_grads[0];
  if (dy == kNoValue)
    return std::vector<ValueId>{kNoValue};
  OpBuilder &b = ctx.builder;
  const TensorType x = b.type(ctx.input(0)); // a copy: the graph grows below
  KILN_ASSIGN_OR_RETURN(Reduction r, planReduction(x, ctx.attrs()));
  ValueId g = dy;
  if (mean) {
    ValueId scale = b.constant(1.0 / static_cast<double>(r.reduced), x.dtype, "scale");
    g = b.create("Mul", "scaled", {g, scale});
  }
  if (b.shape(dy) != r.keep_shape)
    g = b.create("Reshape", "keepdims", {g}, {{"shape", r.keep_shape}});
  if (r.keep_shape != x.shape)
    g = b.create("BroadcastTo", "dx", {g}, {{"shape", x.shape}});
  return std::vector<ValueId>{g};
}

Status reduceKernel(const KernelContext &ctx, const std::vector<const Tensor *> &in,
                    std::vector<Tensor> &out, const AttrMap &attrs, bool mean) {
  const Tensor &x = *in[0];
  KILN_ASSIGN_OR_RETURN(Reduction r, planReduction(x.type(), attrs));
  // The keepdims shape broadcasts to x, and its row-major order is the output's.
  const std::vector<int64_t> map = broadcastIndexMap(r.keep_shape, x.shape());
  std::vector<double> acc(out[0].numElements(), 0.0);
  for (size_t k = 0; k < map.size(); ++k)
    acc[map[k]] += x.getFloat(static_cast<int64_t>(k));
  if (mean)
    for (double &v : acc)
      v /= static_cast<double>(r.reduced); // 0/0 = NaN for an empty reduction, as numpy
  storeDoubles(out[0], acc, ctx.overflow);
  return Status::ok();
}

Expected<std::vector<ValueId>> gradReduceSum(GradContext &ctx) { return gradReduce(ctx, false); }
Expected<std::vector<ValueId>> gradReduceMean(GradContext &ctx) { return gradReduce(ctx, true); }

Status reduceSumKernel(const KernelContext &ctx, const std::vector<const Tensor *> &in,
                       std::vector<Tensor> &out, const AttrMap &attrs) {
  return reduceKernel(ctx, in, out, attrs, false);
}
Status reduceMeanKernel(const KernelContext &ctx, const std::vector<const Tensor *> &in,
                        std::vector<Tensor> &out, const AttrMap &attrs) {
  return reduceKernel(ctx, in, out, attrs, true);
}

// The extremum of each output element's inputs; an empty reduction gives
// -inf for the max and inf for the min (numpy refuses it, ONNX allows it).
Status extremumKernel(const KernelContext &ctx, const std::vector<const Tensor *> &in,
                      std::vector<Tensor> &out, const AttrMap &attrs, bool max) {
  const Tensor &x = *in[0];
  KILN_ASSIGN_OR_RETURN(Reduction r, planReduction(x.type(), attrs));
  const std::vector<int64_t> map = broadcastIndexMap(r.keep_shape, x.shape());
  const double start = max ? -INFINITY : INFINITY;
  std::vector<double> acc(out[0].numElements(), start);
  for (size_t k = 0; k < map.size(); ++k) {
    const double v = x.getFloat(static_cast<int64_t>(k));
    double &a = acc[map[k]];
    if (std::isnan(v) || std::isnan(a))
      a = NAN;
    else
      a = max ? std::max(a, v) : std::min(a, v);
  }
  storeDoubles(out[0], acc, ctx.overflow);
  return Status::ok();
}

Status reduceMaxKernel(const KernelContext &ctx, const std::vector<const Tensor *> &in,
                       std::vector<Tensor> &out, const AttrMap &attrs) {
  return extremumKernel(ctx, in, out, attrs, true);
}
Status reduceMinKernel(const KernelContext &ctx, const std::vector<const Tensor *> &in,
                       std::vector<Tensor> &out, const AttrMap &attrs) {
  return extremumKernel(ctx, in, out, attrs, false);
}

// dx = dy where x equals the extremum, else 0 (ties each take the whole
// gradient, a subgradient like any other).
Expected<std::vector<ValueId>> gradExtremum(GradContext &ctx) {
  ValueId dy = ctx.output_grads[0];
  if (dy == kNoValue)
    return std::vector<ValueId>{kNoValue};
  OpBuilder &b = ctx.builder;
  const TensorType x = b.type(ctx.input(0));
  KILN_ASSIGN_OR_RETURN(Reduction r, planReduction(x, ctx.attrs()));
  ValueId y = ctx.output(0), g = dy;
  if (b.shape(y) != r.keep_shape) {
    y = b.create("Reshape", "y_keepdims", {y}, {{"shape", r.keep_shape}});
    g = b.create("Reshape", "keepdims", {g}, {{"shape", r.keep_shape}});
  }
  ValueId hit = b.create("Equal", "is_extremum", {ctx.input(0), y});
  ValueId zero = b.constant(0, x.dtype, "zero");
  return std::vector<ValueId>{b.create("Where", "dx", {hit, g, zero})};
}

} // namespace

KILN_REGISTER_OP("ReduceMax", OpImpl{inferReduce, gradExtremum, reduceMaxKernel});
KILN_REGISTER_OP("ReduceMin", OpImpl{inferReduce, gradExtremum, reduceMinKernel});
KILN_REGISTER_OP("ReduceSum", OpImpl{inferReduce, gradReduceSum, reduceSumKernel});
KILN_REGISTER_OP("ReduceMean", OpImpl{inferReduce, gradReduceMean, reduceMeanKernel});

} // namespace kiln::ops
