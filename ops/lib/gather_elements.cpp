// GatherElements: every output element reads x at its own index along one
// axis, and GatherElementsGrad, its scatter-add adjoint (shape inference,
// gradient rule, reference kernels).
#include "ops/kernel_util.h"
#include "ops/op_builder.h"
#include "ops/op_registry.h"

namespace kiln::ops {
namespace {

Expected<std::vector<TensorType>> inferGatherElements(const std::vector<TensorType> &in,
                                                      const AttrMap &attrs) {
  if (in.size() != 2)
    return Error("expected 2 inputs (x, indices), got " + std::to_string(in.size()));
  const TensorType &x = in[0], &indices = in[1];
  if (x.rank() < 1 || indices.rank() != x.rank())
    return Error("indices must have the rank of x (1 or more), got " + typeToString(x) + " and " +
                 typeToString(indices));
  KILN_ASSIGN_OR_RETURN(int64_t axis, normalizeAxis(attrs.getInt("axis"), x.rank()));
  for (int64_t a = 0; a < x.rank(); ++a)
    if (a != axis && indices.shape[a] > x.shape[a])
      return Error("indices " + typeToString(indices) + " is larger than x " + typeToString(x) +
                   " along axis " + std::to_string(a));
  return std::vector<TensorType>{TensorType{x.dtype, indices.shape}};
}

Status gatherElementsKernel(const KernelContext &ctx, const std::vector<const Tensor *> &in,
                            std::vector<Tensor> &out, const AttrMap &attrs) {
  const Tensor &x = *in[0], &indices = *in[1];
  Tensor &y = out[0];
  const Shape &xs = x.shape(), &ys = y.shape();
  const int64_t rank = static_cast<int64_t>(xs.size());
  KILN_ASSIGN_OR_RETURN(int64_t axis, normalizeAxis(attrs.getInt("axis"), rank));
  std::vector<int64_t> at(rank);
  for (int64_t e = 0; e < y.numElements(); ++e) {
    int64_t rest = e;
    for (int64_t a = rank; a-- > 0;) {
      at[a] = rest % ys[a];
      rest /= ys[a];
    }
    int64_t index = indices.getInt(e);
    if (index < -xs[axis] || index >= xs[axis])
      return Error("index " + std::to_string(index) + " is outside axis " + std::to_string(axis) +
                   " of x " + typeToString(x.type()));
    at[axis] = index < 0 ? index + xs[axis] : index;
    int64_t flat = 0;
    for (int64_t a = 0; a < rank; ++a)
      flat = flat * xs[a] + at[a];
    if (isFloat(y.dtype()))
      y.setFloat(e, x.getFloat(flat), ctx.overflow);
    else
      y.setInt(e, x.getInt(flat));
  }
  return Status::ok();
}

Expected<std::vector<TensorType>> inferGatherElementsGrad(const std::vector<TensorType> &in,
                                                          const AttrMap &attrs) {
  if (in.size() != 2)
    return Error("expected 2 inputs (dy, indices), got " + std::to_string(in.size()));
  const Shape &shape = attrs.getInts("shape");
  if (in[0].shape != in[1].shape || static_cast<int64_t>(shape.size()) != in[0].rank())
    return Error("dy and indices must have one shape of the rank of `shape`, got " +
                 typeToString(in[0]) + " and " + typeToString(in[1]));
  return std::vector<TensorType>{TensorType{in[0].dtype, shape}};
}

Status gatherElementsGradKernel(const KernelContext &ctx, const std::vector<const Tensor *> &in,
                                std::vector<Tensor> &out, const AttrMap &attrs) {
  const Tensor &dy = *in[0], &indices = *in[1];
  const Shape &xs = out[0].shape(), &ys = dy.shape();
  const int64_t rank = static_cast<int64_t>(xs.size());
  KILN_ASSIGN_OR_RETURN(int64_t axis, normalizeAxis(attrs.getInt("axis"), rank));
  std::vector<double> acc(out[0].numElements(), 0.0);
  std::vector<int64_t> at(rank);
  for (int64_t e = 0; e < dy.numElements(); ++e) {
    int64_t rest = e;
    for (int64_t a = rank; a-- > 0;) {
      at[a] = rest % ys[a];
      rest /= ys[a];
    }
    const int64_t index = indices.getInt(e);
    if (index < -xs[axis] || index >= xs[axis])
      return Error("index " + std::to_string(index) + " is outside axis " + std::to_string(axis));
    at[axis] = index < 0 ? index + xs[axis] : index;
    int64_t flat = 0;
    for (int64_t a = 0; a < rank; ++a)
      flat = flat * xs[a] + at[a];
    acc[flat] += dy.getFloat(e);
  }
  storeDoubles(out[0], acc, ctx.overflow);
  return Status::ok();
}

Expected<std::vector<ValueId>> gradGatherElements(GradContext &ctx) {
  ValueId dy = ctx.output_grads[0];
  if (dy == kNoValue || !isFloat(ctx.builder.dtype(dy)))
    return std::vector<ValueId>{kNoValue, kNoValue};
  OpBuilder &b = ctx.builder;
  const Shape x = b.shape(ctx.input(0));
  ValueId dx = b.create("GatherElementsGrad", "dx", {dy, ctx.input(1)},
                        {{"axis", ctx.attrs().getInt("axis")}, {"shape", x}});
  return std::vector<ValueId>{dx, kNoValue};
}

} // namespace

KILN_REGISTER_OP("GatherElements",
                 OpImpl{inferGatherElements, gradGatherElements, gatherElementsKernel});
KILN_REGISTER_OP("GatherElementsGrad",
                 OpImpl{inferGatherElementsGrad, {}, gatherElementsGradKernel});

} // namespace kiln::ops
