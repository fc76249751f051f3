// The softmax row steps of the host routines (kernels/softmax_rows.h)
// against libm and ir/float16.h's rounding, at lengths that exercise the
// vector body and the tail, with the special values a masked, overflowing
// or poisoned score row holds.
#include "kernels/softmax_rows.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "ir/float16.h"
#include "ir/float_status.h"
#include "kernels/host_features.h"
#include "tests/support/exp_arguments.h"

namespace kiln::kernels {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
const float kNaN = std::numeric_limits<float>::quiet_NaN();

std::vector<float> randomRow(int64_t n, uint32_t seed, float scale = 8.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-scale, scale);
  std::vector<float> row(static_cast<size_t>(n));
  for (float &x : row)
    x = dist(rng);
  return row;
}

// Within `ulps` units in the last place of `expected` (both finite).
void expectUlps(float actual, float expected, int ulps) {
  const int32_t a = std::bit_cast<int32_t>(actual), e = std::bit_cast<int32_t>(expected);
  EXPECT_LE(std::abs(a - e), ulps) << actual << " vs " << expected;
}

TEST(SoftmaxRows, RowMaxIsTheLargestAndNaNWhereverItSits) {
  for (int64_t n : {1, 7, 8, 9, 31, 128, 133}) {
    std::vector<float> row = randomRow(n, static_cast<uint32_t>(n));
    row[static_cast<size_t>(n / 2)] = 100.0f;
    EXPECT_EQ(rowMax(row.data(), n), 100.0f) << n;
    for (int64_t at : {int64_t{0}, n / 2, n - 1}) { // a vector lane or the tail
      std::vector<float> poisoned = row;
      poisoned[static_cast<size_t>(at)] = kNaN;
      EXPECT_TRUE(std::isnan(rowMax(poisoned.data(), n))) << n << " at " << at;
    }
  }
  const std::vector<float> masked(20, -kInf);
  EXPECT_EQ(rowMax(masked.data(), 20), -kInf);
  EXPECT_EQ(rowMax(nullptr, 0), -kInf);
}

TEST(SoftmaxRows, ExpShiftedSumFollowsLibmWithinFourUlps) {
  for (int64_t n : {1, 8, 13, 128, 131}) {
    std::vector<float> row = randomRow(n, 7 + static_cast<uint32_t>(n));
    row[0] = -kInf;                            // a masked key
    row[static_cast<size_t>(n - 1)] = -200.0f; // underflows to 0
    const std::vector<float> in = row;
    const float shift = 3.0f;
    const float sum = expShiftedSum(row.data(), n, shift);
    double expected_sum = 0;
    for (int64_t i = 0; i < n; ++i) {
      const float expected = std::exp(in[i] - shift);
      if (expected == 0.0f)
        EXPECT_EQ(row[i], 0.0f) << i;
      else
        expectUlps(row[i], expected, 4);
      expected_sum += row[i];
    }
    EXPECT_NEAR(sum, expected_sum, 1e-5 * expected_sum);
    // The same row gives the same bits again.
    std::vector<float> again = in;
    EXPECT_EQ(std::bit_cast<uint32_t>(expShiftedSum(again.data(), n, shift)),
              std::bit_cast<uint32_t>(sum));
  }
}

// Across exp's range (testing::expArguments), against exp in double
// rounded once.
TEST(SoftmaxRows, ExpIsWithinItsUlpsAcrossItsRange) {
  const std::vector<float> args = kiln::testing::expArguments();
  std::vector<float> row = args;
  expShiftedSum(row.data(), static_cast<int64_t>(row.size()), 0.0f);
  int worst = 0;
  for (size_t i = 0; i < args.size(); ++i) {
    const float expected = static_cast<float>(std::exp(static_cast<double>(args[i])));
    const int ulps = std::abs(std::bit_cast<int32_t>(row[i]) - std::bit_cast<int32_t>(expected));
    worst = std::max(worst, ulps);
  }
  // The inline AVX-512 polynomial measured 1 ulp at worst; libmvec says 4.
  EXPECT_LE(worst, hostHasAvx512() ? 2 : 4) << "over " << args.size() << " arguments";
  EXPECT_GT(args.size(), size_t{500000});
  std::vector<float> edges{89.0f, kInf, -kInf, -105.0f, 0.0f, -0.0f};
  expShiftedSum(edges.data(), static_cast<int64_t>(edges.size()), 0.0f);
  EXPECT_EQ(edges[0], kInf);
  EXPECT_EQ(edges[1], kInf);
  EXPECT_EQ(edges[2], 0.0f);
  EXPECT_EQ(edges[3], 0.0f);
  EXPECT_EQ(edges[4], 1.0f);
  EXPECT_EQ(edges[5], 1.0f);
}

TEST(SoftmaxRows, ExpShiftedDivideFollowsLibm) {
  std::vector<float> row = randomRow(37, 3);
  const std::vector<float> in = row;
  expShiftedDivide(row.data(), 37, 1.5f, 4.0f);
  for (int64_t i = 0; i < 37; ++i)
    expectUlps(row[i], std::exp(in[i] - 1.5f) / 4.0f, 5);
}

TEST(SoftmaxRows, NaNScoresStayNaN) {
  std::vector<float> row = randomRow(16, 5);
  row[3] = kNaN;
  row[12] = kNaN;
  const float sum = expShiftedSum(row.data(), 16, 0.0f);
  EXPECT_TRUE(std::isnan(row[3]) && std::isnan(row[12]) && std::isnan(sum));
}

// The elementwise row steps give, element by element, what the scalar
// expressions give: vector body and tail alike.
TEST(SoftmaxRows, ElementwiseStepsEqualTheScalarExpressions) {
  for (int64_t n : {1, 7, 8, 37, 128}) {
    const std::vector<float> x = randomRow(n, 21), p = randomRow(n, 22, 1.0f);
    std::vector<float> scaled = x, divided = x, ds = x;
    scaleRow(scaled.data(), n, 0.37f);
    divideRow(divided.data(), n, 3.1f);
    scoreGradientRow(p.data(), n, 0.6f, 0.125f, ds.data());
    for (int64_t i = 0; i < n; ++i) {
      EXPECT_EQ(scaled[i], x[i] * 0.37f);
      EXPECT_EQ(divided[i], x[i] / 3.1f);
      const float g = p[i] * (x[i] - 0.6f);
      EXPECT_EQ(ds[i], g * 0.125f);
    }
  }
}

TEST(SoftmaxRows, Bf16RoundingEqualsTheIrsBitForBit) {
  std::vector<float> row = randomRow(4096, 11, 1.0f);
  for (float special : {0.0f, -0.0f, 1.0f, kInf, -kInf, kNaN, kBF16Max, 3.4e38f,
                        std::numeric_limits<float>::denorm_min(),
                        std::bit_cast<float>(0x3f808000u),  // a tie, even below
                        std::bit_cast<float>(0x3f818000u),  // a tie, odd below
                        std::bit_cast<float>(0x7fa00001u)}) // a signalling NaN
    row.push_back(special);
  row.push_back(0.25f); // a tail past the vectors
  for (size_t i = 0; i < row.size(); ++i) {
    float x = row[i];
    takeFloatStatus();
    roundRowToBf16(&x, 1);
    const bool raised = takeFloatStatus() != 0;
    const float expected = roundToDType(row[i], DType::BF16, OverflowMode::InfNan);
    const bool expected_raised = takeFloatStatus() != 0;
    EXPECT_EQ(std::bit_cast<uint32_t>(x), std::bit_cast<uint32_t>(expected)) << row[i];
    EXPECT_EQ(raised, expected_raised) << row[i];
  }
  std::vector<float> whole = row;
  takeFloatStatus();
  roundRowToBf16(whole.data(), static_cast<int64_t>(whole.size()));
  EXPECT_NE(takeFloatStatus(), 0u); // the row holds inf and NaN
  for (size_t i = 0; i < row.size(); ++i)
    EXPECT_EQ(std::bit_cast<uint32_t>(whole[i]),
              std::bit_cast<uint32_t>(roundToDType(row[i], DType::BF16, OverflowMode::InfNan)));
  takeFloatStatus();
}

TEST(SoftmaxRows, Bf16RoundingOfOrdinaryProbabilitiesRaisesNothing) {
  std::vector<float> row = randomRow(100, 13, 1.0f);
  for (float &x : row)
    x = std::abs(x);
  takeFloatStatus();
  roundRowToBf16(row.data(), 100);
  EXPECT_EQ(takeFloatStatus(), 0u);
}

} // namespace
} // namespace kiln::kernels
