// fp16 and bf16 conversion with round-to-nearest-even and both overflow modes.
#pragma once

#include <cstdint>

#include "ir/dtype.h"

namespace kiln {

inline constexpr float kF16Max = 65504.0f;
inline constexpr float kBF16Max = 3.38953139e38f;

uint16_t floatToHalf(float value, OverflowMode mode);
float halfToFloat(uint16_t bits);
uint16_t floatToBFloat16(float value, OverflowMode mode);
float bfloat16ToFloat(uint16_t bits);

// Rounds `value` to what `dtype` can store and returns it as a float; for f32
// only the overflow mode applies (saturation maps inf to FLT_MAX and NaN to 0).
float roundToDType(float value, DType dtype, OverflowMode mode);

} // namespace kiln
