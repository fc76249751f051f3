// Lowerings of the elementwise math of ops/lib/math_ops.cpp: Abs, Tanh, Erf,
// Sin, Cos and the broadcasting Pow, in f32 (Abs also on i64).
#include "compiler/codegen/lowering/math_exprs.h"
#include "compiler/codegen/op_lowering.h"

namespace kiln::codegen {
namespace {

using Bodies = Expected<std::vector<ExprRef>>;

template <typename Fn> LowerFn unaryLowering(Fn fn) {
  return [fn](LowerContext &ctx) -> Bodies {
    const Shape &shape = ctx.outputType(0).shape;
    return std::vector<ExprRef>{fn(ctx.input(0, LowerContext::vars(shape.size())))};
  };
}

Bodies lowerPow(LowerContext &ctx) {
  const Shape &shape = ctx.outputType(0).shape;
  return std::vector<ExprRef>{
      binary(BinaryOp::Pow, ctx.broadcastInput(0, shape), ctx.broadcastInput(1, shape))};
}

} // namespace

KILN_REGISTER_LOWERING("Abs", unaryLowering([](ExprRef x) { return unary(UnaryOp::Abs, x); }));
KILN_REGISTER_LOWERING("Tanh", unaryLowering(tanhOf));
KILN_REGISTER_LOWERING("Erf", unaryLowering(erfOf));
KILN_REGISTER_LOWERING("Sin", unaryLowering([](ExprRef x) { return unary(UnaryOp::Sin, x); }));
KILN_REGISTER_LOWERING("Cos", unaryLowering([](ExprRef x) { return unary(UnaryOp::Cos, x); }));
KILN_REGISTER_LOWERING("Pow", lowerPow);

} // namespace kiln::codegen
