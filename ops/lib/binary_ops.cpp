// Broadcasting binary arithmetic: Add, Sub, Mul, Div and BiasAdd (shape
// inference, gradient rules and reference kernels).
#include <cstdint>

#include "ops/kernel_util.h"
#include "ops/op_builder.h"
#include "ops/op_registry.h"

namespace kiln::ops {
namespace {

Expected<std::vector<TensorType>> inferBinary(const std::vector<TensorType> &in, const AttrMap &) {
  if (in.size() != 2)
    return Error("expected 2 inputs, got " + std::to_string(in.size()));
  if (in[0].dtype != in[1].dtype)
    return Error("operands must have one dtype, got " + typeToString(in[0]) + " and " +
                 typeToString(in[1]) + "; insert a Cast");
  KILN_ASSIGN_OR_RETURN(Shape shape, broadcastShapes(in[0].shape, in[1].shape));
  return std::vector<TensorType>{TensorType{in[0].dtype, std::move(shape)}};
}

// Integer arithmetic wraps around (two's complement) instead of overflowing.
int64_t wrap(uint64_t v) { return static_cast<int64_t>(v); }

template <typename FloatOp, typename IntOp>
Status binaryKernel(const KernelContext &ctx, const std::vector<const Tensor *> &in,
                    std::vector<Tensor> &out, FloatOp float_op, IntOp int_op) {
  const Tensor &x = *in[0], &y = *in[1];
  Tensor &z = out[0];
  auto shape = broadcastShapes(x.shape(), y.shape());
  if (!shape || *shape != z.shape())
    return Error("inputs " + typeToString(x.type()) + " and " + typeToString(y.type()) +
                 " do not broadcast to the output " + typeToString(z.type()));
  const std::vector<int64_t> xi = broadcastIndexMap(x.shape(), z.shape());
  const std::vector<int64_t> yi = broadcastIndexMap(y.shape(), z.shape());
  if (isFloat(z.dtype())) {
    for (int64_t i = 0; i < z.numElements(); ++i)
      z.setFloat(i, float_op(x.getFloat(xi[i]), y.getFloat(yi[i])), ctx.overflow);
  } else {
    for (int64_t i = 0; i < z.numElements(); ++i)
      z.setInt(i, int_op(x.getInt(xi[i]), y.getInt(yi[i])));
  }
  return Status::ok();
}

Status addKernel(const KernelContext &ctx, const std::vector<const Tensor *> &in,
                 std::vector<Tensor> &out, const AttrMap &) {
  return binaryKernel(
      ctx, in, out, [](float a, float b) { return a + b; },
      [](int64_t a, int64_t b) { return wrap(uint64_t(a) + uint64_t(b)); });
}

Status subKernel(const KernelContext &ctx, const std::vector<const Tensor *> &in,
                 std::vector<Tensor> &out, const AttrMap &) {
  return binaryKernel(
      ctx, in, out, [](float a, float b) { return a - b; },
      [](int64_t a, int64_t b) { return wrap(uint64_t(a) - uint64_t(b)); });
}

Status mulKernel(const KernelContext &ctx, const std::vector<const Tensor *> &in,
                 std::vector<Tensor> &out, const AttrMap &) {
  return binaryKernel(
      ctx, in, out, [](float a, float b) { return a * b; },
      [](int64_t a, int64_t b) { return wrap(uint64_t(a) * uint64_t(b)); });
}

Status divKernel(const KernelContext &ctx, const std::vector<const Tensor *> &in,
                 std::vector<Tensor> &out, const AttrMap &) {
  // The definition admits float operands only, so the integer path is never taken.
  return binaryKernel(
      ctx, in, out, [](float a, float b) { return a / b; }, [](int64_t a, int64_t) { return a; });
}

// A gradient of the broadcast result summed back to the shape of `operand`.
ValueId reduceTo(OpBuilder &b, ValueId grad, ValueId operand, std::string_view name) {
  if (b.shape(grad) == b.shape(operand))
    return grad;
  return b.create("SumToShape", name, {grad}, {{"shape", b.shape(operand)}});
}

// True when no gradient flows: no incoming gradient or integer operands.
bool noGradient(const GradContext &ctx) {
  return ctx.output_grads[0] == kNoValue || !isFloat(ctx.builder.dtype(ctx.input(0)));
}

Expected<std::vector<ValueId>> gradAdd(GradContext &ctx) {
  if (noGradient(ctx))
    return std::vector<ValueId>{kNoValue, kNoValue};
  OpBuilder &b = ctx.builder;
  ValueId dz = ctx.output_grads[0];
  return std::vector<ValueId>{reduceTo(b, dz, ctx.input(0), "dx"),
                              reduceTo(b, dz, ctx.input(1), "dy")};
}

Expected<std::vector<ValueId>> gradSub(GradContext &ctx) {
  if (noGradient(ctx))
    return std::vector<ValueId>{kNoValue, kNoValue};
  OpBuilder &b = ctx.builder;
  ValueId dz = ctx.output_grads[0];
  ValueId dx = reduceTo(b, dz, ctx.input(0), "dx");
  ValueId dy = reduceTo(b, b.create("Neg", "dy", {dz}), ctx.input(1), "dy_sum");
  return std::vector<ValueId>{dx, dy};
}

Expected<std::vector<ValueId>> gradMul(GradContext &ctx) {
  if (noGradient(ctx))
    return std::vector<ValueId>{kNoValue, kNoValue};
  OpBuilder &b = ctx.builder;
  ValueId dz = ctx.output_grads[0], x = ctx.input(0), y = ctx.input(1);
  ValueId dx = reduceTo(b, b.create("Mul", "dx", {dz, y}), x, "dx_sum");
  ValueId dy = reduceTo(b, b.create("Mul", "dy", {dz, x}), y, "dy_sum");
  return std::vector<ValueId>{dx, dy};
}

Expected<std::vector<ValueId>> gradDiv(GradContext &ctx) {
  if (noGradient(ctx))
    return std::vector<ValueId>{kNoValue, kNoValue};
  OpBuilder &b = ctx.builder;
  ValueId dz = ctx.output_grads[0], x = ctx.input(0), y = ctx.input(1), z = ctx.output(0);
  // dx = dz / y; dy = -dz * x / y^2 = -(dz / y) * z.
  ValueId dz_y = b.create("Div", "dx", {dz, y});
  ValueId dy = b.create("Neg", "dy", {b.create("Mul", "dy_pos", {dz_y, z})});
  return std::vector<ValueId>{reduceTo(b, dz_y, x, "dx_sum"), reduceTo(b, dy, y, "dy_sum")};
}

Expected<std::vector<TensorType>> inferBiasAdd(const std::vector<TensorType> &in, const AttrMap &) {
  if (in.size() != 2)
    return Error("expected 2 inputs (x, bias), got " + std::to_string(in.size()));
  const TensorType &x = in[0], &bias = in[1];
  if (x.dtype != bias.dtype)
    return Error("x and bias must have one dtype, got " + typeToString(x) + " and " +
                 typeToString(bias) + "; insert a Cast");
  if (x.rank() < 1)
    return Error("x must have rank >= 1, got " + typeToString(x));
  if (bias.rank() != 1 || bias.shape[0] != x.shape.back())
    return Error("bias must be 1-D with the length of the last dim of x (" +
                 std::to_string(x.shape.back()) + "), got " + typeToString(bias));
  return std::vector<TensorType>{x};
}

Status biasAddKernel(const KernelContext &ctx, const std::vector<const Tensor *> &in,
                     std::vector<Tensor> &out, const AttrMap &) {
  const Tensor &x = *in[0], &bias = *in[1];
  Tensor &y = out[0];
  if (bias.numElements() == 0)
    return Status::ok(); // x is empty too
  const int64_t n = bias.numElements();
  for (int64_t i = 0; i < y.numElements(); ++i)
    y.setFloat(i, x.getFloat(i) + bias.getFloat(i % n), ctx.overflow);
  return Status::ok();
}

Expected<std::vector<ValueId>> gradBiasAdd(GradContext &ctx) {
  ValueId dz = ctx.output_grads[0];
  if (dz == kNoValue)
    return std::vector<ValueId>{kNoValue, kNoValue};
  return std::vector<ValueId>{dz, reduceTo(ctx.builder, dz, ctx.input(1), "dbias")};
}

} // namespace

KILN_REGISTER_OP("Add", OpImpl{inferBinary, gradAdd, addKernel});
KILN_REGISTER_OP("Sub", OpImpl{inferBinary, gradSub, subKernel});
KILN_REGISTER_OP("Mul", OpImpl{inferBinary, gradMul, mulKernel});
KILN_REGISTER_OP("Div", OpImpl{inferBinary, gradDiv, divKernel});
KILN_REGISTER_OP("BiasAdd", OpImpl{inferBiasAdd, gradBiasAdd, biasAddKernel});

} // namespace kiln::ops
