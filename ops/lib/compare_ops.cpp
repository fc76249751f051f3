// Comparisons, selection and logic with numpy broadcasting: Maximum, Minimum,
// Equal, Less, Greater, Not, And, Or and Where (shape inference, gradient
// rules, reference kernels).
#include <cmath>
#include <cstdint>

#include "ops/kernel_util.h"
#include "ops/op_builder.h"
#include "ops/op_registry.h"

namespace kiln::ops {
namespace {

Expected<Shape> broadcastBinary(const std::vector<TensorType> &in) {
  if (in.size() != 2)
    return Error("expected 2 inputs, got " + std::to_string(in.size()));
  if (in[0].dtype != in[1].dtype)
    return Error("operands must have one dtype, got " + typeToString(in[0]) + " and " +
                 typeToString(in[1]) + "; insert a Cast");
  return broadcastShapes(in[0].shape, in[1].shape);
}

Expected<std::vector<TensorType>> inferSame(const std::vector<TensorType> &in, const AttrMap &) {
  KILN_ASSIGN_OR_RETURN(Shape shape, broadcastBinary(in));
  return std::vector<TensorType>{TensorType{in[0].dtype, std::move(shape)}};
}

Expected<std::vector<TensorType>> inferCompare(const std::vector<TensorType> &in, const AttrMap &) {
  KILN_ASSIGN_OR_RETURN(Shape shape, broadcastBinary(in));
  return std::vector<TensorType>{TensorType{DType::Bool, std::move(shape)}};
}

Expected<std::vector<TensorType>> inferNot(const std::vector<TensorType> &in, const AttrMap &) {
  if (in.size() != 1)
    return Error("expected 1 input, got " + std::to_string(in.size()));
  return std::vector<TensorType>{in[0]};
}

Expected<std::vector<TensorType>> inferWhere(const std::vector<TensorType> &in, const AttrMap &) {
  if (in.size() != 3)
    return Error("expected 3 inputs (cond, x, y), got " + std::to_string(in.size()));
  if (in[1].dtype != in[2].dtype)
    return Error("x and y must have one dtype, got " + typeToString(in[1]) + " and " +
                 typeToString(in[2]) + "; insert a Cast");
  KILN_ASSIGN_OR_RETURN(Shape xy, broadcastShapes(in[1].shape, in[2].shape));
  KILN_ASSIGN_OR_RETURN(Shape shape, broadcastShapes(in[0].shape, xy));
  return std::vector<TensorType>{TensorType{in[1].dtype, std::move(shape)}};
}

// Applies `float_op` (floats) or `int_op` (integers and bool) per element;
// the result is stored as a float or an integer by the output's dtype.
template <typename FloatOp, typename IntOp>
Status binaryKernel(const KernelContext &ctx, const std::vector<const Tensor *> &in,
                    std::vector<Tensor> &out, FloatOp float_op, IntOp int_op) {
  const Tensor &x = *in[0], &y = *in[1];
  Tensor &z = out[0];
  const std::vector<int64_t> xi = broadcastIndexMap(x.shape(), z.shape());
  const std::vector<int64_t> yi = broadcastIndexMap(y.shape(), z.shape());
  const bool float_in = isFloat(x.dtype());
  for (int64_t i = 0; i < z.numElements(); ++i) {
    if (float_in) {
      const double v = float_op(double(x.getFloat(xi[i])), double(y.getFloat(yi[i])));
      if (isFloat(z.dtype()))
        z.setFloat(i, static_cast<float>(v), ctx.overflow);
      else
        z.setInt(i, static_cast<int64_t>(v));
    } else {
      z.setInt(i, int_op(x.getInt(xi[i]), y.getInt(yi[i])));
    }
  }
  return Status::ok();
}

#define KILN_BINARY_KERNEL(NAME, FLOAT_EXPR, INT_EXPR)                                             \
  Status NAME(const KernelContext &ctx, const std::vector<const Tensor *> &in,                     \
              std::vector<Tensor> &out, const AttrMap &) {                                         \
    return binaryKernel(                                                                           \
        ctx, in, out, [](double a, double b) -> double { return FLOAT_EXPR; },                     \
        [](int64_t a, int64_t b) -> int64_t { return INT_EXPR; });                                 \
  }

KILN_BINARY_KERNEL(maximumKernel, std::fmax(a, b), std::max(a, b))
KILN_BINARY_KERNEL(minimumKernel, std::fmin(a, b), std::min(a, b))
KILN_BINARY_KERNEL(equalKernel, a == b, a == b)
KILN_BINARY_KERNEL(lessKernel, a < b, a < b)
KILN_BINARY_KERNEL(greaterKernel, a > b, a > b)
KILN_BINARY_KERNEL(andKernel, a != 0 && b != 0, a != 0 && b != 0)
KILN_BINARY_KERNEL(orKernel, a != 0 || b != 0, a != 0 || b != 0)
#undef KILN_BINARY_KERNEL

Status notKernel(const KernelContext &, const std::vector<const Tensor *> &in,
                 std::vector<Tensor> &out, const AttrMap &) {
  for (int64_t i = 0; i < out[0].numElements(); ++i)
    out[0].setInt(i, in[0]->getInt(i) == 0);
  return Status::ok();
}

Status whereKernel(const KernelContext &ctx, const std::vector<const Tensor *> &in,
                   std::vector<Tensor> &out, const AttrMap &) {
  const Tensor &c = *in[0], &x = *in[1], &y = *in[2];
  Tensor &z = out[0];
  const std::vector<int64_t> ci = broadcastIndexMap(c.shape(), z.shape());
  const std::vector<int64_t> xi = broadcastIndexMap(x.shape(), z.shape());
  const std::vector<int64_t> yi = broadcastIndexMap(y.shape(), z.shape());
  for (int64_t i = 0; i < z.numElements(); ++i) {
    const bool take_x = c.getInt(ci[i]) != 0;
    if (isFloat(z.dtype()))
      z.setFloat(i, take_x ? x.getFloat(xi[i]) : y.getFloat(yi[i]), ctx.overflow);
    else
      z.setInt(i, take_x ? x.getInt(xi[i]) : y.getInt(yi[i]));
  }
  return Status::ok();
}

ValueId reduceTo(OpBuilder &b, ValueId grad, ValueId operand, std::string_view name) {
  if (b.shape(grad) == b.shape(operand))
    return grad;
  return b.create("SumToShape", name, {grad}, {{"shape", b.shape(operand)}});
}

// The gradient of a select: dz where `pick` holds, else 0, summed back to
// each operand's shape.
std::vector<ValueId> selectGrads(OpBuilder &b, ValueId pick, ValueId dz, ValueId x, ValueId y) {
  ValueId zero = b.constant(0, b.dtype(dz), "zero");
  ValueId dx = b.create("Where", "dx", {pick, dz, zero});
  ValueId dy = b.create("Where", "dy", {pick, zero, dz});
  return {reduceTo(b, dx, x, "dx_sum"), reduceTo(b, dy, y, "dy_sum")};
}

// Ties send the gradient to x (as torch.maximum's ties split it, any
// subgradient is one; the first operand is kiln's).
Expected<std::vector<ValueId>> gradExtremum(GradContext &ctx, bool max) {
  ValueId dz = ctx.output_grads[0], x = ctx.input(0), y = ctx.input(1);
  if (dz == kNoValue || !isFloat(ctx.builder.dtype(x)))
    return std::vector<ValueId>{kNoValue, kNoValue};
  OpBuilder &b = ctx.builder;
  ValueId lost = b.create(max ? "Less" : "Greater", "x_loses", {x, y});
  ValueId pick = b.create("Not", "x_wins", {lost});
  return selectGrads(b, pick, dz, x, y);
}
Expected<std::vector<ValueId>> gradMaximum(GradContext &ctx) { return gradExtremum(ctx, true); }
Expected<std::vector<ValueId>> gradMinimum(GradContext &ctx) { return gradExtremum(ctx, false); }

Expected<std::vector<ValueId>> gradWhere(GradContext &ctx) {
  ValueId dz = ctx.output_grads[0];
  if (dz == kNoValue || !isFloat(ctx.builder.dtype(ctx.input(1))))
    return std::vector<ValueId>{kNoValue, kNoValue, kNoValue};
  std::vector<ValueId> g = selectGrads(ctx.builder, ctx.input(0), dz, ctx.input(1), ctx.input(2));
  return std::vector<ValueId>{kNoValue, g[0], g[1]};
}

// Comparisons and logic give bools: no gradient reaches their operands.
Expected<std::vector<ValueId>> gradNone(GradContext &ctx) {
  return std::vector<ValueId>(ctx.node.inputs.size(), kNoValue);
}

} // namespace

KILN_REGISTER_OP("Maximum", OpImpl{inferSame, gradMaximum, maximumKernel});
KILN_REGISTER_OP("Minimum", OpImpl{inferSame, gradMinimum, minimumKernel});
KILN_REGISTER_OP("Equal", OpImpl{inferCompare, gradNone, equalKernel});
KILN_REGISTER_OP("Less", OpImpl{inferCompare, gradNone, lessKernel});
KILN_REGISTER_OP("Greater", OpImpl{inferCompare, gradNone, greaterKernel});
KILN_REGISTER_OP("Not", OpImpl{inferNot, gradNone, notKernel});
KILN_REGISTER_OP("And", OpImpl{inferSame, gradNone, andKernel});
KILN_REGISTER_OP("Or", OpImpl{inferSame, gradNone, orKernel});
KILN_REGISTER_OP("Where", OpImpl{inferWhere, gradWhere, whereKernel});

} // namespace kiln::ops
