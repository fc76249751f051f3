// Elementwise unary math: Neg, Exp, Log, Sqrt, Rsqrt, Sigmoid, Silu and the
// fused backward ops RsqrtGrad and SiluGrad.
#include <cmath>
#include <cstdint>

#include "ops/op_builder.h"
#include "ops/op_registry.h"

namespace kiln::ops {
namespace {

Expected<std::vector<TensorType>> inferUnary(const std::vector<TensorType> &in, const AttrMap &) {
  if (in.size() != 1)
    return Error("expected 1 input, got " + std::to_string(in.size()));
  return std::vector<TensorType>{in[0]};
}

// The fused backward ops combine two tensors of one type without broadcasting.
Expected<std::vector<TensorType>> inferSameType(const std::vector<TensorType> &in,
                                                const AttrMap &) {
  if (in.size() != 2)
    return Error("expected 2 inputs, got " + std::to_string(in.size()));
  if (!(in[0] == in[1]))
    return Error("both inputs must have one type (no broadcasting), got " + typeToString(in[0]) +
                 " and " + typeToString(in[1]));
  return std::vector<TensorType>{in[0]};
}

// Computes in double and stores through f32, as an f32 unit followed by a store.
template <typename Fn>
Status unaryKernel(const KernelContext &ctx, const std::vector<const Tensor *> &in,
                   std::vector<Tensor> &out, Fn fn) {
  const Tensor &x = *in[0];
  Tensor &y = out[0];
  for (int64_t i = 0; i < y.numElements(); ++i)
    y.setFloat(i, static_cast<float>(fn(static_cast<double>(x.getFloat(i)))), ctx.overflow);
  return Status::ok();
}

template <typename Fn>
Status pairKernel(const KernelContext &ctx, const std::vector<const Tensor *> &in,
                  std::vector<Tensor> &out, Fn fn) {
  const Tensor &a = *in[0], &b = *in[1];
  Tensor &y = out[0];
  for (int64_t i = 0; i < y.numElements(); ++i)
    y.setFloat(i, static_cast<float>(fn(double(a.getFloat(i)), double(b.getFloat(i)))),
               ctx.overflow);
  return Status::ok();
}

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

Status negKernel(const KernelContext &ctx, const std::vector<const Tensor *> &in,
                 std::vector<Tensor> &out, const AttrMap &) {
  const Tensor &x = *in[0];
  Tensor &y = out[0];
  if (isFloat(y.dtype()))
    return unaryKernel(ctx, in, out, [](double v) { return -v; });
  // Two's complement wrap-around: -INT_MIN stays INT_MIN.
  for (int64_t i = 0; i < y.numElements(); ++i)
    y.setInt(i, static_cast<int64_t>(uint64_t(0) - static_cast<uint64_t>(x.getInt(i))));
  return Status::ok();
}

Status expKernel(const KernelContext &ctx, const std::vector<const Tensor *> &in,
                 std::vector<Tensor> &out, const AttrMap &) {
  return unaryKernel(ctx, in, out, [](double v) { return std::exp(v); });
}

Status logKernel(const KernelContext &ctx, const std::vector<const Tensor *> &in,
                 std::vector<Tensor> &out, const AttrMap &) {
  return unaryKernel(ctx, in, out, [](double v) { return std::log(v); });
}

Status sqrtKernel(const KernelContext &ctx, const std::vector<const Tensor *> &in,
                  std::vector<Tensor> &out, const AttrMap &) {
  return unaryKernel(ctx, in, out, [](double v) { return std::sqrt(v); });
}

Status rsqrtKernel(const KernelContext &ctx, const std::vector<const Tensor *> &in,
                   std::vector<Tensor> &out, const AttrMap &) {
  return unaryKernel(ctx, in, out, [](double v) { return 1.0 / std::sqrt(v); });
}

Status rsqrtGradKernel(const KernelContext &ctx, const std::vector<const Tensor *> &in,
                       std::vector<Tensor> &out, const AttrMap &) {
  return pairKernel(ctx, in, out, [](double y, double dy) { return -0.5 * dy * y * y * y; });
}

Status sigmoidKernel(const KernelContext &ctx, const std::vector<const Tensor *> &in,
                     std::vector<Tensor> &out, const AttrMap &) {
  return unaryKernel(ctx, in, out, sigmoid);
}

Status siluKernel(const KernelContext &ctx, const std::vector<const Tensor *> &in,
                  std::vector<Tensor> &out, const AttrMap &) {
  return unaryKernel(ctx, in, out, [](double v) { return v * sigmoid(v); });
}

Status siluGradKernel(const KernelContext &ctx, const std::vector<const Tensor *> &in,
                      std::vector<Tensor> &out, const AttrMap &) {
  return pairKernel(ctx, in, out, [](double dy, double x) {
    double s = sigmoid(x);
    return dy * s * (1.0 + x * (1.0 - s));
  });
}

// Gradient rules; each returns kNoValue when no gradient reaches the output.

Expected<std::vector<ValueId>> gradNeg(GradContext &ctx) {
  ValueId dy = ctx.output_grads[0];
  if (dy == kNoValue || !isFloat(ctx.builder.dtype(ctx.input(0))))
    return std::vector<ValueId>{kNoValue};
  return std::vector<ValueId>{ctx.builder.create("Neg", "dx", {dy})};
}

Expected<std::vector<ValueId>> gradExp(GradContext &ctx) {
  ValueId dy = ctx.output_grads[0];
  if (dy == kNoValue)
    return std::vector<ValueId>{kNoValue};
  return std::vector<ValueId>{ctx.builder.create("Mul", "dx", {dy, ctx.output(0)})};
}

Expected<std::vector<ValueId>> gradLog(GradContext &ctx) {
  ValueId dy = ctx.output_grads[0];
  if (dy == kNoValue)
    return std::vector<ValueId>{kNoValue};
  return std::vector<ValueId>{ctx.builder.create("Div", "dx", {dy, ctx.input(0)})};
}

Expected<std::vector<ValueId>> gradSqrt(GradContext &ctx) {
  ValueId dy = ctx.output_grads[0];
  if (dy == kNoValue)
    return std::vector<ValueId>{kNoValue};
  // 0.5 * dy / y as dy / (y + y): no constant needed.
  OpBuilder &b = ctx.builder;
  ValueId y = ctx.output(0);
  return std::vector<ValueId>{b.create("Div", "dx", {dy, b.create("Add", "two_y", {y, y})})};
}

Expected<std::vector<ValueId>> gradRsqrt(GradContext &ctx) {
  ValueId dy = ctx.output_grads[0];
  if (dy == kNoValue)
    return std::vector<ValueId>{kNoValue};
  return std::vector<ValueId>{ctx.builder.create("RsqrtGrad", "dx", {ctx.output(0), dy})};
}

Expected<std::vector<ValueId>> gradSigmoid(GradContext &ctx) {
  ValueId dy = ctx.output_grads[0];
  if (dy == kNoValue)
    return std::vector<ValueId>{kNoValue};
  OpBuilder &b = ctx.builder;
  ValueId y = ctx.output(0);
  ValueId one = b.constant(1.0, b.dtype(y), "one");
  ValueId dsig = b.create("Mul", "dsig", {y, b.create("Sub", "one_minus_y", {one, y})});
  return std::vector<ValueId>{b.create("Mul", "dx", {dy, dsig})};
}

Expected<std::vector<ValueId>> gradSilu(GradContext &ctx) {
  ValueId dy = ctx.output_grads[0];
  if (dy == kNoValue)
    return std::vector<ValueId>{kNoValue};
  return std::vector<ValueId>{ctx.builder.create("SiluGrad", "dx", {dy, ctx.input(0)})};
}

} // namespace

KILN_REGISTER_OP("Neg", OpImpl{inferUnary, gradNeg, negKernel});
KILN_REGISTER_OP("Exp", OpImpl{inferUnary, gradExp, expKernel});
KILN_REGISTER_OP("Log", OpImpl{inferUnary, gradLog, logKernel});
KILN_REGISTER_OP("Sqrt", OpImpl{inferUnary, gradSqrt, sqrtKernel});
KILN_REGISTER_OP("Rsqrt", OpImpl{inferUnary, gradRsqrt, rsqrtKernel});
KILN_REGISTER_OP("RsqrtGrad", OpImpl{inferSameType, {}, rsqrtGradKernel});
KILN_REGISTER_OP("Sigmoid", OpImpl{inferUnary, gradSigmoid, sigmoidKernel});
KILN_REGISTER_OP("Silu", OpImpl{inferUnary, gradSilu, siluKernel});
KILN_REGISTER_OP("SiluGrad", OpImpl{inferSameType, {}, siluGradKernel});

} // namespace kiln::ops
