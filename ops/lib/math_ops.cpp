// Elementwise math ONNX models use beyond the decoder's: Abs, Tanh, Erf, Sin,
// Cos and the broadcasting Pow (shape inference, gradient rules, reference
// kernels).
#include <cmath>
#include <cstdint>

#include "ops/kernel_util.h"
#include "ops/op_builder.h"
#include "ops/op_registry.h"

namespace kiln::ops {
namespace {

constexpr double kTwoOverSqrtPi = 1.1283791670955126;

Expected<std::vector<TensorType>> inferUnary(const std::vector<TensorType> &in, const AttrMap &) {
  if (in.size() != 1)
    return Error("expected 1 input, got " + std::to_string(in.size()));
  return std::vector<TensorType>{in[0]};
}

// Computes in double and stores through the output's dtype.
template <typename Fn>
Status unaryKernel(const KernelContext &ctx, const std::vector<const Tensor *> &in,
                   std::vector<Tensor> &out, Fn fn) {
  const Tensor &x = *in[0];
  Tensor &y = out[0];
  for (int64_t i = 0; i < y.numElements(); ++i)
    y.setFloat(i, static_cast<float>(fn(static_cast<double>(x.getFloat(i)))), ctx.overflow);
  return Status::ok();
}

Status absKernel(const KernelContext &ctx, const std::vector<const Tensor *> &in,
                 std::vector<Tensor> &out, const AttrMap &) {
  if (isFloat(out[0].dtype()))
    return unaryKernel(ctx, in, out, [](double v) { return std::fabs(v); });
  // Two's complement: |INT_MIN| stays INT_MIN.
  for (int64_t i = 0; i < out[0].numElements(); ++i) {
    const int64_t v = in[0]->getInt(i);
    out[0].setInt(i, v < 0 ? static_cast<int64_t>(uint64_t(0) - static_cast<uint64_t>(v)) : v);
  }
  return Status::ok();
}

Status tanhKernel(const KernelContext &ctx, const std::vector<const Tensor *> &in,
                  std::vector<Tensor> &out, const AttrMap &) {
  return unaryKernel(ctx, in, out, [](double v) { return std::tanh(v); });
}
Status erfKernel(const KernelContext &ctx, const std::vector<const Tensor *> &in,
                 std::vector<Tensor> &out, const AttrMap &) {
  return unaryKernel(ctx, in, out, [](double v) { return std::erf(v); });
}
Status sinKernel(const KernelContext &ctx, const std::vector<const Tensor *> &in,
                 std::vector<Tensor> &out, const AttrMap &) {
  return unaryKernel(ctx, in, out, [](double v) { return std::sin(v); });
}
Status cosKernel(const KernelContext &ctx, const std::vector<const Tensor *> &in,
                 std::vector<Tensor> &out, const AttrMap &) {
  return unaryKernel(ctx, in, out, [](double v) { return std::cos(v); });
}

Expected<std::vector<TensorType>> inferPow(const std::vector<TensorType> &in, const AttrMap &) {
  if (in.size() != 2)
    return Error("expected 2 inputs, got " + std::to_string(in.size()));
  if (in[0].dtype != in[1].dtype)
    return Error("operands must have one dtype, got " + typeToString(in[0]) + " and " +
                 typeToString(in[1]) + "; insert a Cast");
  KILN_ASSIGN_OR_RETURN(Shape shape, broadcastShapes(in[0].shape, in[1].shape));
  return std::vector<TensorType>{TensorType{in[0].dtype, std::move(shape)}};
}

Status powKernel(const KernelContext &ctx, const std::vector<const Tensor *> &in,
                 std::vector<Tensor> &out, const AttrMap &) {
  const Tensor &x = *in[0], &y = *in[1];
  Tensor &z = out[0];
  const std::vector<int64_t> xi = broadcastIndexMap(x.shape(), z.shape());
  const std::vector<int64_t> yi = broadcastIndexMap(y.shape(), z.shape());
  for (int64_t i = 0; i < z.numElements(); ++i)
    z.setFloat(i,
               static_cast<float>(std::pow(double(x.getFloat(xi[i])), double(y.getFloat(yi[i])))),
               ctx.overflow);
  return Status::ok();
}

ValueId reduceTo(OpBuilder &b, ValueId grad, ValueId operand, std::string_view name) {
  if (b.shape(grad) == b.shape(operand))
    return grad;
  return b.create("SumToShape", name, {grad}, {{"shape", b.shape(operand)}});
}

bool noGradient(const GradContext &ctx) {
  return ctx.output_grads[0] == kNoValue || !isFloat(ctx.builder.dtype(ctx.input(0)));
}

// d|x| = dy where x >= 0, -dy below.
Expected<std::vector<ValueId>> gradAbs(GradContext &ctx) {
  if (noGradient(ctx))
    return std::vector<ValueId>{kNoValue};
  OpBuilder &b = ctx.builder;
  ValueId dy = ctx.output_grads[0], x = ctx.input(0);
  ValueId negative = b.create("Less", "negative", {x, b.constant(0, b.dtype(x), "zero")});
  return std::vector<ValueId>{
      b.create("Where", "dx", {negative, b.create("Neg", "ndy", {dy}), dy})};
}

// dtanh = dy (1 - y^2).
Expected<std::vector<ValueId>> gradTanh(GradContext &ctx) {
  if (noGradient(ctx))
    return std::vector<ValueId>{kNoValue};
  OpBuilder &b = ctx.builder;
  ValueId y = ctx.output(0);
  ValueId one = b.constant(1, b.dtype(y), "one");
  ValueId d = b.create("Sub", "one_minus_y2", {one, b.create("Mul", "y2", {y, y})});
  return std::vector<ValueId>{b.create("Mul", "dx", {ctx.output_grads[0], d})};
}

// derf = dy 2/sqrt(pi) e^-x^2.
Expected<std::vector<ValueId>> gradErf(GradContext &ctx) {
  if (noGradient(ctx))
    return std::vector<ValueId>{kNoValue};
  OpBuilder &b = ctx.builder;
  ValueId x = ctx.input(0);
  ValueId e =
      b.create("Exp", "gauss", {b.create("Neg", "neg_x2", {b.create("Mul", "x2", {x, x})})});
  ValueId scaled = b.create("Mul", "slope", {e, b.constant(kTwoOverSqrtPi, b.dtype(x), "c")});
  return std::vector<ValueId>{b.create("Mul", "dx", {ctx.output_grads[0], scaled})};
}

Expected<std::vector<ValueId>> gradSin(GradContext &ctx) {
  if (noGradient(ctx))
    return std::vector<ValueId>{kNoValue};
  OpBuilder &b = ctx.builder;
  ValueId c = b.create("Cos", "cos", {ctx.input(0)});
  return std::vector<ValueId>{b.create("Mul", "dx", {ctx.output_grads[0], c})};
}

Expected<std::vector<ValueId>> gradCos(GradContext &ctx) {
  if (noGradient(ctx))
    return std::vector<ValueId>{kNoValue};
  OpBuilder &b = ctx.builder;
  ValueId s = b.create("Neg", "neg_sin", {b.create("Sin", "sin", {ctx.input(0)})});
  return std::vector<ValueId>{b.create("Mul", "dx", {ctx.output_grads[0], s})};
}

// dx = dz y x^(y-1); dy = dz z log(x).
Expected<std::vector<ValueId>> gradPow(GradContext &ctx) {
  if (noGradient(ctx))
    return std::vector<ValueId>{kNoValue, kNoValue};
  OpBuilder &b = ctx.builder;
  ValueId dz = ctx.output_grads[0], x = ctx.input(0), y = ctx.input(1), z = ctx.output(0);
  ValueId one = b.constant(1, b.dtype(x), "one");
  ValueId xm1 = b.create("Pow", "x_pow_y_minus_1", {x, b.create("Sub", "y_minus_1", {y, one})});
  ValueId dx = b.create("Mul", "dx", {dz, b.create("Mul", "slope", {y, xm1})});
  ValueId dy =
      b.create("Mul", "dy", {dz, b.create("Mul", "z_log_x", {z, b.create("Log", "log_x", {x})})});
  return std::vector<ValueId>{reduceTo(b, dx, x, "dx_sum"), reduceTo(b, dy, y, "dy_sum")};
}

} // namespace

KILN_REGISTER_OP("Abs", OpImpl{inferUnary, gradAbs, absKernel});
KILN_REGISTER_OP("Tanh", OpImpl{inferUnary, gradTanh, tanhKernel});
KILN_REGISTER_OP("Erf", OpImpl{inferUnary, gradErf, erfKernel});
KILN_REGISTER_OP("Sin", OpImpl{inferUnary, gradSin, sinKernel});
KILN_REGISTER_OP("Cos", OpImpl{inferUnary, gradCos, cosKernel});
KILN_REGISTER_OP("Pow", OpImpl{inferPow, gradPow, powKernel});

} // namespace kiln::ops
