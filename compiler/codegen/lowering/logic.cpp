// Lowerings of ops/lib/compare_ops.cpp and trilu.cpp: Maximum, Minimum, the
// comparisons, Not, And, Or, Where and Trilu.
#include "compiler/codegen/op_lowering.h"

namespace kiln::codegen {
namespace {

using Bodies = Expected<std::vector<ExprRef>>;

// Bools compare as integers.
ExprRef comparable(ExprRef x) {
  return x->type == ScalarType::Bool ? convert(x, ScalarType::I64) : x;
}

LowerFn binaryLowering(BinaryOp op) {
  return [op](LowerContext &ctx) -> Bodies {
    const Shape &shape = ctx.outputType(0).shape;
    ExprRef a = ctx.broadcastInput(0, shape), b = ctx.broadcastInput(1, shape);
    if (op != BinaryOp::And && op != BinaryOp::Or) {
      a = comparable(a);
      b = comparable(b);
    }
    return std::vector<ExprRef>{binary(op, a, b)};
  };
}

Bodies lowerNot(LowerContext &ctx) {
  const Shape &shape = ctx.outputType(0).shape;
  return std::vector<ExprRef>{unary(UnaryOp::Not, ctx.input(0, LowerContext::vars(shape.size())))};
}

Bodies lowerWhere(LowerContext &ctx) {
  const Shape &shape = ctx.outputType(0).shape;
  return std::vector<ExprRef>{select(ctx.broadcastInput(0, shape), ctx.broadcastInput(1, shape),
                                     ctx.broadcastInput(2, shape))};
}

Bodies lowerTrilu(LowerContext &ctx) {
  const Shape &shape = ctx.outputType(0).shape;
  const int rank = static_cast<int>(shape.size());
  if (rank < 2)
    return ctx.error("needs rank 2 or more");
  const int64_t k = ctx.attrs().getInt("k");
  ExprRef diff = var(rank - 1) - var(rank - 2);
  ExprRef keep = ctx.attrs().getBool("upper") ? binary(BinaryOp::Ge, diff, iconst(k))
                                              : binary(BinaryOp::Le, diff, iconst(k));
  ExprRef x = ctx.input(0, LowerContext::vars(rank));
  ExprRef zero = x->type == ScalarType::F32   ? fconst(0)
                 : x->type == ScalarType::I64 ? iconst(0)
                                              : bconst(false);
  return std::vector<ExprRef>{select(keep, x, zero)};
}

} // namespace

KILN_REGISTER_LOWERING("Maximum", binaryLowering(BinaryOp::Max));
KILN_REGISTER_LOWERING("Minimum", binaryLowering(BinaryOp::Min));
KILN_REGISTER_LOWERING("Equal", binaryLowering(BinaryOp::Eq));
KILN_REGISTER_LOWERING("Less", binaryLowering(BinaryOp::Lt));
KILN_REGISTER_LOWERING("Greater", binaryLowering(BinaryOp::Gt));
KILN_REGISTER_LOWERING("And", binaryLowering(BinaryOp::And));
KILN_REGISTER_LOWERING("Or", binaryLowering(BinaryOp::Or));
KILN_REGISTER_LOWERING("Not", lowerNot);
KILN_REGISTER_LOWERING("Where", lowerWhere);
KILN_REGISTER_LOWERING("Trilu", lowerTrilu);

} // namespace kiln::codegen
