// Lowerings of the elementwise and broadcast ops (ops/lib/unary_ops.cpp,
// binary_ops.cpp, cast.cpp, fill.cpp, add_n.cpp, causal_mask.cpp): f32
// arithmetic, i64 wrap-around for integers.
#include <cstdint>

#include "compiler/codegen/op_lowering.h"

namespace kiln::codegen {
namespace {

using Bodies = Expected<std::vector<ExprRef>>;

ExprRef sigmoid(ExprRef x) { return fconst(1) / (fconst(1) + unary(UnaryOp::Exp, -x)); }

template <typename Fn> LowerFn unaryLowering(Fn fn) {
  return [fn](LowerContext &ctx) -> Bodies {
    const Shape &shape = ctx.outputType(0).shape;
    return std::vector<ExprRef>{fn(ctx.input(0, LowerContext::vars(shape.size())))};
  };
}

template <typename Fn> LowerFn binaryLowering(Fn fn) {
  return [fn](LowerContext &ctx) -> Bodies {
    const Shape &shape = ctx.outputType(0).shape;
    return std::vector<ExprRef>{fn(ctx.broadcastInput(0, shape), ctx.broadcastInput(1, shape))};
  };
}

Bodies lowerBiasAdd(LowerContext &ctx) {
  const Shape &shape = ctx.outputType(0).shape;
  ExprRef x = ctx.input(0, LowerContext::vars(shape.size()));
  ExprRef bias = ctx.input(1, {var(static_cast<int>(shape.size()) - 1)});
  return std::vector<ExprRef>{x + bias};
}

Bodies lowerAddN(LowerContext &ctx) {
  const Shape &shape = ctx.outputType(0).shape;
  ExprRef sum = ctx.input(0, LowerContext::vars(shape.size()));
  for (size_t i = 1; i < ctx.numInputs(); ++i)
    sum = sum + ctx.input(i, LowerContext::vars(shape.size()));
  return std::vector<ExprRef>{sum};
}

// Cast rounds to its target even inside an f32 kernel: the rounding is its meaning.
Bodies lowerCast(LowerContext &ctx) {
  const Shape &shape = ctx.outputType(0).shape;
  const DType to = ctx.outputType(0).dtype;
  const DType from = ctx.inputType(0).dtype;
  ExprRef x = ctx.input(0, LowerContext::vars(shape.size()));
  if (to == DType::Bool) {
    ExprRef zero = isFloat(from) ? fconst(0) : iconst(0);
    return std::vector<ExprRef>{from == DType::Bool ? x : binary(BinaryOp::Ne, x, zero)};
  }
  if (isFloat(to))
    return std::vector<ExprRef>{round(convert(x, ScalarType::F32), to)};
  ExprRef i = convert(x, ScalarType::I64); // floats truncate, saturating, NaN -> 0
  if (to == DType::I32 &&
      isFloat(from)) // clamps to i32; from integers the store keeps the low bits
    i = binary(BinaryOp::Min, binary(BinaryOp::Max, i, iconst(INT32_MIN)), iconst(INT32_MAX));
  return std::vector<ExprRef>{i};
}

Bodies lowerFill(LowerContext &ctx) {
  const TensorType &out = ctx.outputType(0);
  const double value = ctx.attrs().getFloat("value");
  switch (scalarTypeOf(out.dtype)) {
  case ScalarType::F32:
    return std::vector<ExprRef>{fconst(static_cast<float>(value))};
  case ScalarType::I64:
    return std::vector<ExprRef>{iconst(static_cast<int64_t>(value))};
  case ScalarType::Bool:
    return std::vector<ExprRef>{bconst(static_cast<int64_t>(value) != 0)};
  }
  return ctx.error("unsupported dtype");
}

// Key j lies after query i when j > i + keys - queries.
Bodies lowerCausalMask(LowerContext &ctx) {
  const Shape &shape = ctx.outputType(0).shape;
  const int rank = static_cast<int>(shape.size());
  if (rank < 2)
    return ctx.error("needs (queries, keys) as its last two axes");
  const int64_t offset = shape[rank - 1] - shape[rank - 2];
  ExprRef masked = binary(BinaryOp::Gt, var(rank - 1), var(rank - 2) + iconst(offset));
  ExprRef fill = fconst(static_cast<float>(ctx.attrs().getFloat("fill")));
  return std::vector<ExprRef>{select(masked, fill, ctx.input(0, LowerContext::vars(rank)))};
}

} // namespace

KILN_REGISTER_LOWERING("Neg", unaryLowering([](ExprRef x) { return -x; }));
KILN_REGISTER_LOWERING("Exp", unaryLowering([](ExprRef x) { return unary(UnaryOp::Exp, x); }));
KILN_REGISTER_LOWERING("Log", unaryLowering([](ExprRef x) { return unary(UnaryOp::Log, x); }));
KILN_REGISTER_LOWERING("Sqrt", unaryLowering([](ExprRef x) { return unary(UnaryOp::Sqrt, x); }));
KILN_REGISTER_LOWERING("Rsqrt", unaryLowering([](ExprRef x) {
                         return fconst(1) / unary(UnaryOp::Sqrt, x);
                       }));
KILN_REGISTER_LOWERING("Sigmoid", unaryLowering(sigmoid));
KILN_REGISTER_LOWERING("Silu", unaryLowering([](ExprRef x) { return x * sigmoid(x); }));
KILN_REGISTER_LOWERING("RsqrtGrad", binaryLowering([](ExprRef y, ExprRef dy) {
                         return fconst(-0.5) * dy * y * y * y;
                       }));
KILN_REGISTER_LOWERING("SiluGrad", binaryLowering([](ExprRef dy, ExprRef x) {
                         ExprRef s = sigmoid(x);
                         return dy * s * (fconst(1) + x * (fconst(1) - s));
                       }));
KILN_REGISTER_LOWERING("Add", binaryLowering([](ExprRef a, ExprRef b) { return a + b; }));
KILN_REGISTER_LOWERING("Sub", binaryLowering([](ExprRef a, ExprRef b) { return a - b; }));
KILN_REGISTER_LOWERING("Mul", binaryLowering([](ExprRef a, ExprRef b) { return a * b; }));
KILN_REGISTER_LOWERING("Div", binaryLowering([](ExprRef a, ExprRef b) { return a / b; }));
KILN_REGISTER_LOWERING("BiasAdd", lowerBiasAdd);
KILN_REGISTER_LOWERING("AddN", lowerAddN);
KILN_REGISTER_LOWERING("Cast", lowerCast);
KILN_REGISTER_LOWERING("Fill", lowerFill);
KILN_REGISTER_LOWERING("CausalMask", lowerCausalMask);

} // namespace kiln::codegen
