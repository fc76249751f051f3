// Lowering of RotaryCosSin (ops/lib/rotary_cos_sin.cpp): the tables computed from the element's
// indices alone, each step in f32 as the reference (and torch) rounds it.
#include <cmath>

#include "compiler/codegen/op_lowering.h"

namespace kiln::codegen {
namespace {

using Bodies = Expected<std::vector<ExprRef>>;

// Llama 3.1's rope_scaling as the reference applies it, in f32: a long
// wavelength (2 pi / inv_freq > original / low_freq_factor) divided by the
// factor, a short one kept, the band between blended.
ExprRef llama3Scaled(const AttrMap &attrs, ExprRef inv_freq) {
  const float factor = static_cast<float>(attrs.getFloat("scaling_factor"));
  if (factor == 1.0f)
    return inv_freq;
  const float low = static_cast<float>(attrs.getFloat("low_freq_factor"));
  const float high = static_cast<float>(attrs.getFloat("high_freq_factor"));
  const float original = static_cast<float>(attrs.getInt("original_max_position"));
  const ExprRef wavelen = fconst(2.0f * static_cast<float>(M_PI)) / inv_freq;
  const ExprRef smooth = (fconst(original) / wavelen - fconst(low)) / fconst(high - low);
  const ExprRef blended = (fconst(1.0f) - smooth) * inv_freq / fconst(factor) + smooth * inv_freq;
  const ExprRef long_wave = binary(BinaryOp::Lt, fconst(original / low), wavelen);
  const ExprRef short_wave = binary(BinaryOp::Lt, wavelen, fconst(original / high));
  return select(long_wave, inv_freq / fconst(factor), select(short_wave, inv_freq, blended));
}

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
  const ExprRef freq = convert(var(0), ScalarType::F32) * llama3Scaled(ctx.attrs(), inv_freq);
  return std::vector<ExprRef>{unary(UnaryOp::Cos, freq), unary(UnaryOp::Sin, freq)};
}

} // namespace

KILN_REGISTER_LOWERING("RotaryCosSin", lowerRotaryCosSin);

} // namespace kiln::codegen
