#include "ir/float16.h"

#include "ir/float_status.h"

#include <bit>
#include <cmath>
#include <limits>

namespace kiln {
namespace {

// Clamps to +-max_finite and maps NaN to 0, raising the float status when it does.
float saturate(float value, float max_finite) {
  if (std::isnan(value) || value > max_finite || value < -max_finite)
    raiseFloatStatus();
  if (std::isnan(value))
    return 0.0f;
  if (value > max_finite)
    return max_finite;
  if (value < -max_finite)
    return -max_finite;
  return value;
}

} // namespace

uint16_t floatToHalf(float value, OverflowMode mode) {
  uint32_t f = std::bit_cast<uint32_t>(value);
  uint16_t sign = static_cast<uint16_t>((f >> 16) & 0x8000u);
  uint32_t abs = f & 0x7fffffffu;
  if (abs > 0x7f800000u) { // NaN
    raiseFloatStatus();
    return mode == OverflowMode::Saturation ? sign : static_cast<uint16_t>(sign | 0x7e00u);
  }
  const uint16_t overflow = mode == OverflowMode::Saturation ? 0x7bffu : 0x7c00u;
  if (abs >= 0x477ff000u) { // rounds to >= 65520: overflow (or input inf)
    raiseFloatStatus();
    return static_cast<uint16_t>(sign | overflow);
  }
  if (abs < 0x38800000u) { // below the smallest normal half: subnormal or zero
    if (abs < 0x33000000u) // below half of the smallest subnormal: rounds to zero
      return sign;
    // value = mantissa * 2^(exponent - 150) and a subnormal half is h * 2^-24.
    uint32_t mantissa = (abs & 0x007fffffu) | 0x00800000u;
    int shift = 126 - static_cast<int>(abs >> 23); // 14..24
    uint32_t half = mantissa >> shift;
    uint32_t rest = mantissa & ((1u << shift) - 1);
    uint32_t halfway = 1u << (shift - 1);
    if (rest > halfway || (rest == halfway && (half & 1u)))
      ++half;
    return static_cast<uint16_t>(sign | half);
  }
  // Normal: rebias the exponent and round the 13 dropped mantissa bits to even.
  uint32_t rebased = abs - 0x38000000u;
  uint32_t half = rebased >> 13;
  uint32_t rest = rebased & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (half & 1u)))
    ++half;
  return static_cast<uint16_t>(sign | half);
}

float halfToFloat(uint16_t bits) {
  uint32_t sign = static_cast<uint32_t>(bits & 0x8000u) << 16;
  uint32_t exponent = (bits >> 10) & 0x1fu;
  uint32_t mantissa = bits & 0x3ffu;
  if (exponent == 0x1f)
    return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));
  if (exponent == 0) {
    float magnitude = std::ldexp(static_cast<float>(mantissa), -24);
    return sign ? -magnitude : magnitude;
  }
  return std::bit_cast<float>(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

uint16_t floatToBFloat16(float value, OverflowMode mode) {
  if (mode == OverflowMode::Saturation)
    value = saturate(value, kBF16Max);
  uint32_t f = std::bit_cast<uint32_t>(value);
  if ((f & 0x7fffffffu) > 0x7f800000u) { // NaN: keep it quiet
    raiseFloatStatus();
    return static_cast<uint16_t>((f >> 16) | 0x0040u);
  }
  const uint16_t rounded = static_cast<uint16_t>((f + 0x7fffu + ((f >> 16) & 1u)) >> 16);
  if ((rounded & 0x7f80u) == 0x7f80u) // rounded to (or was) inf
    raiseFloatStatus();
  return rounded;
}

float bfloat16ToFloat(uint16_t bits) {
  return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16);
}

float roundToDType(float value, DType dtype, OverflowMode mode) {
  switch (dtype) {
  case DType::F16:
    return halfToFloat(floatToHalf(value, mode));
  case DType::BF16:
    return bfloat16ToFloat(floatToBFloat16(value, mode));
  case DType::F32:
    if (mode == OverflowMode::Saturation)
      return saturate(value, std::numeric_limits<float>::max());
    if (!std::isfinite(value))
      raiseFloatStatus();
    return value;
  default:
    return value;
  }
}

} // namespace kiln
