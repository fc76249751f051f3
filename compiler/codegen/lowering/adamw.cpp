// Lowering of AdamW (ops/lib/adamw.cpp): one elementwise kernel with three outputs, the new
// param, m and v, in PyTorch's order of operations, in f32 (the reference uses double).
#include <cmath>

#include "compiler/codegen/op_lowering.h"

namespace kiln::codegen {
namespace {

using Bodies = Expected<std::vector<ExprRef>>;

// 1 - beta^t for the step t (f32). Naively, beta rounded to f32 has its error multiplied by t
// in pow, and 1 - beta^t cancels for beta^t near 1 (beta2 = 0.999, small t). Instead
// x = t ln(beta) with ln(beta) from double, and 1 - e^x = -expm1(x) by Kahan's
// expm1(x) = (u - 1) x / log(u), u = e^x (exact x when u rounds to 1); where u < 1/e there is
// no cancellation and 1 - u is used as is (it also avoids log(0) once beta^t underflows).
ExprRef biasCorrection(double beta, const ExprRef &t) {
  if (beta == 0)
    return fconst(1); // 0^t = 0 for every valid step t >= 1
  const ExprRef x = t * fconst(std::log(beta));
  const ExprRef u = unary(UnaryOp::Exp, x);
  const ExprRef one_minus_u = fconst(1) - u;
  const ExprRef kahan = one_minus_u * x / unary(UnaryOp::Log, u);
  return select(binary(BinaryOp::Eq, u, fconst(1)), -x,
                select(binary(BinaryOp::Lt, x, fconst(-1)), one_minus_u, kahan));
}

// p -= lr*wd*p; m = b1*m + (1-b1)*g; v = b2*v + (1-b2)*g^2;
// p -= lr * (m / (1-b1^t)) / (sqrt(v / (1-b2^t)) + eps).
// The decay term stays even when wd is 0: lr*0*p is NaN for an infinite p, as in the reference.
// A step below 1 (an error in the reference) gives inf or NaN here.
Bodies lowerAdamW(LowerContext &ctx) {
  const Shape &shape = ctx.inputType(0).shape;
  for (size_t i = 1; i < 4; ++i)
    if (ctx.inputType(i).shape != shape)
      return ctx.error("grad, m and v must have the param's shape " + shapeToString(shape));
  if (!ctx.inputType(4).shape.empty() || !ctx.inputType(5).shape.empty())
    return ctx.error("lr and step must be scalars");
  const double b1 = ctx.attrs().getFloat("beta1"), b2 = ctx.attrs().getFloat("beta2");
  const double eps = ctx.attrs().getFloat("eps"), wd = ctx.attrs().getFloat("weight_decay");
  if (!(b1 >= 0 && b1 < 1) || !(b2 >= 0 && b2 < 1))
    return ctx.error("beta1 and beta2 must lie in [0, 1)");

  const std::vector<ExprRef> idx = LowerContext::vars(shape.size());
  const ExprRef g = ctx.input(1, idx);
  const ExprRef lr = ctx.input(4, {});
  const ExprRef t = convert(ctx.input(5, {}), ScalarType::F32);

  ExprRef p = ctx.input(0, idx);
  p = p - lr * fconst(wd) * p;
  // 1 - b is formed in double, as the reference's (1 - b1) is, before the f32 constant.
  const ExprRef m = fconst(b1) * ctx.input(2, idx) + fconst(1 - b1) * g;
  const ExprRef v = fconst(b2) * ctx.input(3, idx) + fconst(1 - b2) * g * g;
  const ExprRef m_hat = m / biasCorrection(b1, t);
  const ExprRef denom = unary(UnaryOp::Sqrt, v / biasCorrection(b2, t)) + fconst(eps);
  p = p - lr * m_hat / denom;
  return std::vector<ExprRef>{p, m, v};
}

} // namespace

KILN_REGISTER_LOWERING("AdamW", lowerAdamW);

} // namespace kiln::codegen
