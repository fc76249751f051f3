// Concat (join along an axis) and Split (cut along an axis into given sizes);
// each is the other's adjoint.
#include <cstring>

#include "ops/kernel_util.h"
#include "ops/op_builder.h"
#include "ops/op_registry.h"

namespace kiln::ops {
namespace {

// A tensor seen as [outer, dim(axis), inner]; `inner` counted in bytes.
struct AxisView {
  int64_t outer = 1;
  int64_t inner_bytes = 1;
};

AxisView viewAround(const Shape &shape, int64_t axis, DType dtype) {
  AxisView v;
  for (int64_t a = 0; a < axis; ++a)
    v.outer *= shape[a];
  v.inner_bytes = static_cast<int64_t>(dtypeSize(dtype));
  for (size_t a = axis + 1; a < shape.size(); ++a)
    v.inner_bytes *= shape[a];
  return v;
}

Expected<int64_t> axisOf(const AttrMap &attrs, const TensorType &x) {
  if (x.rank() == 0)
    return Error("the input " + typeToString(x) + " is a scalar; it needs at least one axis");
  return normalizeAxis(attrs.getInt("axis"), x.rank());
}

// --- Concat ------------------------------------------------------------------

Expected<std::vector<TensorType>> inferConcat(const std::vector<TensorType> &in,
                                              const AttrMap &attrs) {
  KILN_RETURN_IF_ERROR(requireSameDType(in, "the inputs of Concat"));
  KILN_ASSIGN_OR_RETURN(int64_t axis, axisOf(attrs, in[0]));
  Shape shape = in[0].shape;
  for (size_t i = 1; i < in.size(); ++i) {
    const TensorType &t = in[i];
    bool ok = t.rank() == in[0].rank();
    for (int64_t a = 0; ok && a < t.rank(); ++a)
      ok = a == axis || t.shape[a] == in[0].shape[a];
    if (!ok)
      return Error("input " + std::to_string(i) + " " + typeToString(t) +
                   " does not match input 0 " + typeToString(in[0]) +
                   ": inputs must have the same rank and equal dimensions except on axis " +
                   std::to_string(axis));
    shape[axis] += t.shape[axis];
  }
  return std::vector<TensorType>{{in[0].dtype, shape}};
}

Expected<std::vector<ValueId>> gradConcat(GradContext &ctx) {
  ValueId dy = ctx.output_grads[0];
  const size_t n = ctx.node.inputs.size();
  if (dy == kNoValue)
    return std::vector<ValueId>(n, kNoValue);
  const int64_t axis = *normalizeAxis(ctx.attrs().getInt("axis"), ctx.builder.type(dy).rank());
  std::vector<int64_t> sizes;
  for (size_t i = 0; i < n; ++i)
    sizes.push_back(ctx.builder.shape(ctx.input(i))[axis]);
  if (n == 1)
    return std::vector<ValueId>{dy};
  std::vector<ValueId> dxs =
      ctx.builder.createMulti("Split", "dx", {dy}, {{"axis", axis}, {"sizes", sizes}});
  if (dxs.size() != n)
    return std::vector<ValueId>(n, kNoValue); // the builder's status holds the error
  return dxs;
}

Status concatKernel(const KernelContext &ctx, const std::vector<const Tensor *> &in,
                    std::vector<Tensor> &out, const AttrMap &attrs) {
  Tensor &y = out[0];
  const int64_t axis = *normalizeAxis(attrs.getInt("axis"), y.type().rank());
  const AxisView view = viewAround(y.shape(), axis, y.dtype());
  const int64_t row_bytes = y.shape()[axis] * view.inner_bytes;
  auto *dst = static_cast<uint8_t *>(y.data());
  int64_t offset = 0; // bytes into each output row
  for (const Tensor *x : in) {
    const int64_t chunk = x->shape()[axis] * view.inner_bytes;
    const auto *src = static_cast<const uint8_t *>(x->data());
    for (int64_t o = 0; o < view.outer && chunk > 0; ++o)
      std::memcpy(dst + o * row_bytes + offset, src + o * chunk, chunk);
    offset += chunk;
  }
  return Status::ok();
}

// --- Split -------------------------------------------------------------------

Expected<std::vector<TensorType>> inferSplit(const std::vector<TensorType> &in,
                                             const AttrMap &attrs) {
  const TensorType &x = in[0];
  KILN_ASSIGN_OR_RETURN(int64_t axis, axisOf(attrs, x));
  const std::vector<int64_t> &sizes = attrs.getInts("sizes");
  if (sizes.empty())
    return Error("sizes is empty; Split needs at least one piece");
  int64_t total = 0;
  std::vector<TensorType> outs;
  for (int64_t s : sizes) {
    if (s < 0)
      return Error("sizes " + shapeToString(sizes) + " has a negative entry; sizes must be >= 0");
    total += s;
    TensorType t = x;
    t.shape[axis] = s;
    outs.push_back(t);
  }
  if (total != x.shape[axis])
    return Error("sizes " + shapeToString(sizes) + " sum to " + std::to_string(total) +
                 " but axis " + std::to_string(axis) + " of the input " + typeToString(x) +
                 " has " + std::to_string(x.shape[axis]) + " elements");
  return outs;
}

Expected<std::vector<ValueId>> gradSplit(GradContext &ctx) {
  bool any = false;
  for (ValueId g : ctx.output_grads)
    any = any || g != kNoValue;
  if (!any)
    return std::vector<ValueId>{kNoValue};
  std::vector<ValueId> parts;
  for (size_t k = 0; k < ctx.output_grads.size(); ++k) {
    ValueId g = ctx.output_grads[k];
    if (g == kNoValue) {
      const TensorType t = ctx.builder.type(ctx.output(k)); // a copy: the graph grows
      g = ctx.builder.constant(0, t.dtype, "zero", t.shape);
    }
    parts.push_back(g);
  }
  if (parts.size() == 1)
    return parts;
  return std::vector<ValueId>{
      ctx.builder.create("Concat", "dx", parts, {{"axis", ctx.attrs().getInt("axis")}})};
}

Status splitKernel(const KernelContext &ctx, const std::vector<const Tensor *> &in,
                   std::vector<Tensor> &out, const AttrMap &attrs) {
  const Tensor &x = *in[0];
  const int64_t axis = *normalizeAxis(attrs.getInt("axis"), x.type().rank());
  const AxisView view = viewAround(x.shape(), axis, x.dtype());
  const int64_t row_bytes = x.shape()[axis] * view.inner_bytes;
  const auto *src = static_cast<const uint8_t *>(x.data());
  int64_t offset = 0;
  for (Tensor &y : out) {
    const int64_t chunk = y.shape()[axis] * view.inner_bytes;
    auto *dst = static_cast<uint8_t *>(y.data());
    for (int64_t o = 0; o < view.outer && chunk > 0; ++o)
      std::memcpy(dst + o * chunk, src + o * row_bytes + offset, chunk);
    offset += chunk;
  }
  return Status::ok();
}

} // namespace

KILN_REGISTER_OP("Concat", OpImpl{inferConcat, gradConcat, concatKernel});
KILN_REGISTER_OP("Split", OpImpl{inferSplit, gradSplit, splitKernel});

} // namespace kiln::ops
