// BroadcastTo and its adjoint SumToShape: numpy broadcasting of one tensor to
// a shape, and summing the broadcast axes away again.
#include <cstring>

#include "ops/kernel_util.h"
#include "ops/op_builder.h"
#include "ops/op_registry.h"

namespace kiln::ops {
namespace {

Status requireDims(const Shape &shape, const char *what) {
  for (int64_t d : shape)
    if (d < 0)
      return Error(std::string(what) + " " + shapeToString(shape) +
                   " has a negative dimension; dimensions must be >= 0");
  return Status::ok();
}

// True when `from` broadcasts to exactly `to` under numpy rules.
bool broadcastsTo(const Shape &from, const Shape &to) {
  auto joined = broadcastShapes(from, to);
  return joined && *joined == to;
}

// --- BroadcastTo -------------------------------------------------------------

Expected<std::vector<TensorType>> inferBroadcastTo(const std::vector<TensorType> &in,
                                                   const AttrMap &attrs) {
  const Shape &shape = attrs.getInts("shape");
  KILN_RETURN_IF_ERROR(requireDims(shape, "shape"));
  if (!broadcastsTo(in[0].shape, shape))
    return Error("input " + typeToString(in[0]) + " does not broadcast to shape " +
                 shapeToString(shape) +
                 " (each input dimension must be 1 or equal the aligned target dimension)");
  return std::vector<TensorType>{{in[0].dtype, shape}};
}

Expected<std::vector<ValueId>> gradBroadcastTo(GradContext &ctx) {
  ValueId x = ctx.input(0);
  ValueId dy = ctx.output_grads[0];
  if (dy == kNoValue || !isFloat(ctx.builder.dtype(x)))
    return std::vector<ValueId>{kNoValue};
  if (ctx.builder.shape(dy) == ctx.builder.shape(x))
    return std::vector<ValueId>{dy};
  return std::vector<ValueId>{
      ctx.builder.create("SumToShape", "dx", {dy}, {{"shape", ctx.builder.shape(x)}})};
}

// Pure data movement: elements are copied bit for bit, whatever the dtype.
Status broadcastToKernel(const KernelContext &ctx, const std::vector<const Tensor *> &in,
                         std::vector<Tensor> &out, const AttrMap &attrs) {
  const Tensor &x = *in[0];
  Tensor &y = out[0];
  const size_t elem = dtypeSize(x.dtype());
  const std::vector<int64_t> map = broadcastIndexMap(x.shape(), y.shape());
  const auto *src = static_cast<const uint8_t *>(x.data());
  auto *dst = static_cast<uint8_t *>(y.data());
  for (size_t k = 0; k < map.size(); ++k)
    std::memcpy(dst + k * elem, src + map[k] * elem, elem);
  return Status::ok();
}

// --- SumToShape --------------------------------------------------------------

Expected<std::vector<TensorType>> inferSumToShape(const std::vector<TensorType> &in,
                                                  const AttrMap &attrs) {
  const Shape &shape = attrs.getInts("shape");
  KILN_RETURN_IF_ERROR(requireDims(shape, "shape"));
  if (!broadcastsTo(shape, in[0].shape))
    return Error("shape " + shapeToString(shape) + " does not broadcast to the input " +
                 typeToString(in[0]) +
                 " (each dimension of `shape` must be 1 or equal the aligned input dimension)");
  return std::vector<TensorType>{{in[0].dtype, shape}};
}

Expected<std::vector<ValueId>> gradSumToShape(GradContext &ctx) {
  ValueId x = ctx.input(0);
  ValueId dy = ctx.output_grads[0];
  if (dy == kNoValue)
    return std::vector<ValueId>{kNoValue};
  if (ctx.builder.shape(dy) == ctx.builder.shape(x))
    return std::vector<ValueId>{dy};
  return std::vector<ValueId>{
      ctx.builder.create("BroadcastTo", "dx", {dy}, {{"shape", ctx.builder.shape(x)}})};
}

Status sumToShapeKernel(const KernelContext &ctx, const std::vector<const Tensor *> &in,
                        std::vector<Tensor> &out, const AttrMap &attrs) {
  const Tensor &x = *in[0];
  Tensor &y = out[0];
  // Each x element adds into the y element that broadcasting would read it from.
  const std::vector<int64_t> map = broadcastIndexMap(y.shape(), x.shape());
  std::vector<double> acc(y.numElements(), 0.0);
  for (size_t k = 0; k < map.size(); ++k)
    acc[map[k]] += x.getFloat(static_cast<int64_t>(k));
  storeDoubles(y, acc, ctx.overflow);
  return Status::ok();
}

} // namespace

KILN_REGISTER_OP("BroadcastTo", OpImpl{inferBroadcastTo, gradBroadcastTo, broadcastToKernel});
KILN_REGISTER_OP("SumToShape", OpImpl{inferSumToShape, gradSumToShape, sumToShapeKernel});

} // namespace kiln::ops
