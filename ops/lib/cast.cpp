// Cast: dtype conversion. Floats round to nearest even per the overflow mode,
// float -> integer truncates toward zero (saturating, NaN -> 0).
#include <cmath>
#include <cstdint>
#include <limits>

#include "ops/op_builder.h"
#include "ops/op_registry.h"

namespace kiln::ops {
namespace {

Expected<std::vector<TensorType>> inferCast(const std::vector<TensorType> &in,
                                            const AttrMap &attrs) {
  if (in.size() != 1)
    return Error("expected 1 input, got " + std::to_string(in.size()));
  return std::vector<TensorType>{TensorType{attrs.getDType("dtype"), in[0].shape}};
}

// Truncation toward zero that clamps to the target range instead of being
// undefined; NaN becomes 0.
int64_t floatToInt(float v, DType dtype) {
  if (std::isnan(v))
    return 0;
  const double t = std::trunc(static_cast<double>(v));
  if (dtype == DType::I32) {
    constexpr double lo = std::numeric_limits<int32_t>::min();
    constexpr double hi = std::numeric_limits<int32_t>::max();
    return static_cast<int64_t>(t < lo ? lo : (t > hi ? hi : t));
  }
  // 2^63 is the first double above the int64 range.
  constexpr double two63 = 9223372036854775808.0;
  if (t >= two63)
    return std::numeric_limits<int64_t>::max();
  if (t < -two63)
    return std::numeric_limits<int64_t>::min();
  return static_cast<int64_t>(t);
}

Status castKernel(const KernelContext &ctx, const std::vector<const Tensor *> &in,
                  std::vector<Tensor> &out, const AttrMap &) {
  const Tensor &x = *in[0];
  Tensor &y = out[0];
  const DType from = x.dtype(), to = y.dtype();
  for (int64_t i = 0; i < y.numElements(); ++i) {
    if (to == DType::Bool) {
      y.setInt(i, isFloat(from) ? x.getFloat(i) != 0.0f : x.getInt(i) != 0);
    } else if (isFloat(to)) {
      // From integers through getInt: i64 values above 2^24 round once, not twice.
      float v = isFloat(from) ? x.getFloat(i) : static_cast<float>(x.getInt(i));
      y.setFloat(i, v, ctx.overflow);
    } else if (isFloat(from)) {
      y.setInt(i, floatToInt(x.getFloat(i), to));
    } else {
      y.setInt(i, x.getInt(i)); // i64 -> i32 keeps the low 32 bits
    }
  }
  return Status::ok();
}

Expected<std::vector<ValueId>> gradCast(GradContext &ctx) {
  ValueId dy = ctx.output_grads[0];
  const DType from = ctx.builder.dtype(ctx.input(0));
  if (dy == kNoValue || !isFloat(from))
    return std::vector<ValueId>{kNoValue};
  return std::vector<ValueId>{ctx.builder.create("Cast", "dx", {dy}, {{"dtype", from}})};
}

} // namespace

KILN_REGISTER_OP("Cast", OpImpl{inferCast, gradCast, castKernel});

} // namespace kiln::ops
