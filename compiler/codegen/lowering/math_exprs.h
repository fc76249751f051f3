// Math functions the emitter has no instruction for, written as kernel
// expressions: shared by the built-in lowerings and custom ops' compute.
#pragma once

#include "compiler/codegen/kernel_expr.h"

namespace kiln::codegen {

inline ExprRef sigmoidOf(ExprRef x) { return fconst(1) / (fconst(1) + unary(UnaryOp::Exp, -x)); }

// tanh(x) = sign(x) (1 - e) / (1 + e) with e = exp(-2|x|); near 0 that
// cancels, so |x| < 0.3 takes the Taylor series to x^9 (error below 1e-8).
inline ExprRef tanhOf(ExprRef x) {
  ExprRef a = unary(UnaryOp::Abs, x);
  ExprRef e = unary(UnaryOp::Exp, fconst(-2) * a);
  ExprRef big = (fconst(1) - e) / (fconst(1) + e);
  ExprRef x2 = x * x;
  ExprRef poly = fconst(-17.0 / 315) + x2 * fconst(62.0 / 2835);
  poly = fconst(2.0 / 15) + x2 * poly;
  poly = fconst(-1.0 / 3) + x2 * poly;
  poly = x * (fconst(1) + x2 * poly);
  return select(binary(BinaryOp::Lt, a, fconst(0.3)), poly,
                select(binary(BinaryOp::Lt, x, fconst(0)), -big, big));
}

// erf(x): below |x| = 0.5 its Taylor series to x^11 (relative error below
// 1e-7); above, Abramowitz and Stegun 7.1.26 (absolute error below 1.5e-7),
// odd in x.
inline ExprRef erfOf(ExprRef x) {
  ExprRef a = unary(UnaryOp::Abs, x);
  ExprRef x2 = x * x;
  ExprRef series = fconst(1.0 / 1320) * fconst(-1);
  series = fconst(1.0 / 216) + x2 * series;
  series = fconst(-1.0 / 42) + x2 * series;
  series = fconst(1.0 / 10) + x2 * series;
  series = fconst(-1.0 / 3) + x2 * series;
  series = fconst(1.1283791670955126) * x * (fconst(1) + x2 * series);
  ExprRef t = fconst(1) / (fconst(1) + fconst(0.3275911) * a);
  ExprRef p = fconst(1.061405429);
  p = fconst(-1.453152027) + t * p;
  p = fconst(1.421413741) + t * p;
  p = fconst(-0.284496736) + t * p;
  p = fconst(0.254829592) + t * p;
  ExprRef big = fconst(1) - t * p * unary(UnaryOp::Exp, -(a * a));
  return select(binary(BinaryOp::Lt, a, fconst(0.5)), series,
                select(binary(BinaryOp::Lt, x, fconst(0)), -big, big));
}

} // namespace kiln::codegen
