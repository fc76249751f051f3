#include <cmath>
#include <limits>

#include <gtest/gtest.h>

#include "ir/float16.h"
#include "ir/float_status.h"

namespace kiln {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

TEST(Float16, RoundTripsEveryHalf) {
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    uint16_t h = static_cast<uint16_t>(bits);
    float f = halfToFloat(h);
    if (std::isnan(f))
      continue;
    EXPECT_EQ(floatToHalf(f, OverflowMode::InfNan), h) << "bits " << bits;
  }
}

TEST(Float16, RoundsToNearestEven) {
  // 1 + 2^-11 lies halfway between 1 and the next half (1 + 2^-10): ties to even (1).
  EXPECT_EQ(halfToFloat(floatToHalf(1.0f + std::ldexp(1.0f, -11), OverflowMode::InfNan)), 1.0f);
  // Slightly above halfway rounds up.
  EXPECT_EQ(halfToFloat(floatToHalf(1.0f + std::ldexp(1.5f, -11), OverflowMode::InfNan)),
            1.0f + std::ldexp(1.0f, -10));
  // Subnormals: the smallest half is 2^-24; half of it ties to zero.
  EXPECT_EQ(halfToFloat(floatToHalf(std::ldexp(1.0f, -24), OverflowMode::InfNan)),
            std::ldexp(1.0f, -24));
  EXPECT_EQ(floatToHalf(std::ldexp(1.0f, -25), OverflowMode::InfNan), 0);
  EXPECT_EQ(halfToFloat(floatToHalf(std::ldexp(1.5f, -25), OverflowMode::InfNan)),
            std::ldexp(1.0f, -24));
}

TEST(Float16, OverflowModes) {
  EXPECT_EQ(halfToFloat(floatToHalf(65504.0f, OverflowMode::InfNan)), 65504.0f);
  EXPECT_EQ(halfToFloat(floatToHalf(65519.0f, OverflowMode::InfNan)), 65504.0f);
  EXPECT_EQ(halfToFloat(floatToHalf(65520.0f, OverflowMode::InfNan)), kInf);
  EXPECT_EQ(halfToFloat(floatToHalf(-1e6f, OverflowMode::InfNan)), -kInf);
  EXPECT_EQ(halfToFloat(floatToHalf(65520.0f, OverflowMode::Saturation)), 65504.0f);
  EXPECT_EQ(halfToFloat(floatToHalf(-kInf, OverflowMode::Saturation)), -65504.0f);
  EXPECT_EQ(halfToFloat(floatToHalf(std::nanf(""), OverflowMode::Saturation)), 0.0f);
  EXPECT_TRUE(std::isnan(halfToFloat(floatToHalf(std::nanf(""), OverflowMode::InfNan))));
}

TEST(BFloat16, RoundingAndOverflow) {
  EXPECT_EQ(bfloat16ToFloat(floatToBFloat16(1.0f, OverflowMode::InfNan)), 1.0f);
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties to even.
  EXPECT_EQ(bfloat16ToFloat(floatToBFloat16(1.0f + std::ldexp(1.0f, -8), OverflowMode::InfNan)),
            1.0f);
  EXPECT_EQ(
      bfloat16ToFloat(floatToBFloat16(std::numeric_limits<float>::max(), OverflowMode::InfNan)),
      kInf);
  EXPECT_EQ(
      bfloat16ToFloat(floatToBFloat16(std::numeric_limits<float>::max(), OverflowMode::Saturation)),
      kBF16Max);
  EXPECT_EQ(bfloat16ToFloat(floatToBFloat16(std::nanf(""), OverflowMode::Saturation)), 0.0f);
  EXPECT_TRUE(std::isnan(bfloat16ToFloat(floatToBFloat16(std::nanf(""), OverflowMode::InfNan))));
}

TEST(RoundToDType, F32SaturatesOnlyInSaturationMode) {
  EXPECT_EQ(roundToDType(kInf, DType::F32, OverflowMode::InfNan), kInf);
  EXPECT_EQ(roundToDType(kInf, DType::F32, OverflowMode::Saturation),
            std::numeric_limits<float>::max());
  EXPECT_EQ(roundToDType(std::nanf(""), DType::F32, OverflowMode::Saturation), 0.0f);
}

} // namespace
} // namespace kiln

namespace kiln {
namespace {

// ir/float_status.h: the reference rounding raises the thread's status where
// it overflows, in both modes, and nowhere else.
TEST(FloatStatus, RoundingRaisesItWhereItOverflows) {
  for (OverflowMode mode : {OverflowMode::Saturation, OverflowMode::InfNan}) {
    takeFloatStatus();
    EXPECT_EQ(roundToDType(65504.0f, DType::F16, mode), 65504.0f);
    EXPECT_EQ(roundToDType(65519.0f, DType::F16, mode), 65504.0f) << "rounds down, no overflow";
    roundToDType(-3.0e38f, DType::BF16, mode);
    roundToDType(1.0e30f, DType::F32, mode);
    EXPECT_EQ(takeFloatStatus(), 0u) << overflowModeName(mode);

    for (float value : {65520.0f, -1e6f, INFINITY, NAN}) {
      roundToDType(value, DType::F16, mode);
      EXPECT_EQ(takeFloatStatus(), kFloatStatusOverflow) << value << " " << overflowModeName(mode);
    }
    roundToDType(INFINITY, DType::F32, mode);
    EXPECT_EQ(takeFloatStatus(), kFloatStatusOverflow);
    roundToDType(NAN, DType::BF16, mode);
    EXPECT_EQ(takeFloatStatus(), kFloatStatusOverflow);
    roundToDType(3.4e38f, DType::BF16, mode); // past bf16's largest finite, 3.3895e38
    EXPECT_EQ(takeFloatStatus(), kFloatStatusOverflow);
  }
  // Saturation stores a finite value: the status is the only trace.
  EXPECT_EQ(roundToDType(1e6f, DType::F16, OverflowMode::Saturation), 65504.0f);
  EXPECT_EQ(takeFloatStatus(), kFloatStatusOverflow);
}

} // namespace
} // namespace kiln
