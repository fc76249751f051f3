// Lowering of RotaryCosSin (ops/lib/rotary_cos_sin.cpp): the tables computed from the element's
// indices alone, each step in f32 as the reference (and torch) rounds it.
#include <cmath>

#include "compiler/codegen/op_lowering.h"

namespace kiln::codegen {
namespace {

using Bodies = Expected<std::vector<ExprRef>>;

// Element (t, col) of both tables takes i = col mod dim/2:
//   inv_freq = 1 / base^(f32(2i) / f32(dim)), freq = f32(t) * inv_freq.
// The reference takes cos and sin of freq in double and rounds once; here they are f32.
Bodies lowerRotaryCosSin(LowerContext &ctx) {
  const int64_t dim = ctx.attrs().getInt("dim");
  const double base = ctx.attrs().getFloat("base");
  if (dim < 2 || dim % 2 != 0)
    return ctx.error("dim must be even and >= 2, got " + std::to_string(dim));
  if (!(base > 0) || !std::isfinite(base))
    return ctx.error("base must be a finite number > 0");
  const ExprRef i = binary(BinaryOp::Rem, var(1), iconst(dim / 2));
  const ExprRef exponent =
      convert(iconst(2) * i, ScalarType::F32) / fconst(static_cast<float>(dim));
  // The reference raises base rounded to f32.
  const ExprRef inv_freq =
      fconst(1) / binary(BinaryOp::Pow, fconst(static_cast<float>(base)), exponent);
  const ExprRef freq = convert(var(0), ScalarType::F32) * inv_freq;
  return std::vector<ExprRef>{unary(UnaryOp::Cos, freq), unary(UnaryOp::Sin, freq)};
}

} // namespace

KILN_REGISTER_LOWERING("RotaryCosSin", lowerRotaryCosSin);

} // namespace kiln::codegen
