// BroadcastTo and SumToShape: numpy-rule inference, kernels against naive
// loops, accumulation in double with one final rounding, both overflow modes,
// and finite-difference gradient checks.
#include <gtest/gtest.h>

#include <cmath>

#include "ir/float16.h"
#include "tests/support/gradient_check.h"
#include "tests/support/op_test_util.h"
#include "tests/support/random.h"

namespace kiln::testing {
namespace {

using Ints = std::vector<int64_t>;

TEST(BroadcastTo, InfersTargetShape) {
  auto t = inferOp("BroadcastTo", {{DType::I32, {3, 1}}}, {{"shape", Ints{2, 3, 4}}});
  ASSERT_TRUE(t) << t.message();
  EXPECT_EQ((*t)[0], (TensorType{DType::I32, {2, 3, 4}}));
  t = inferOp("BroadcastTo", {f32({})}, {{"shape", Ints{5}}});
  ASSERT_TRUE(t) << t.message();
  EXPECT_EQ((*t)[0], f32({5}));
}

TEST(BroadcastTo, RejectsIncompatibleShapes) {
  auto t = inferOp("BroadcastTo", {f32({3})}, {{"shape", Ints{2, 4}}});
  ASSERT_FALSE(t);
  EXPECT_TRUE(mentions(t.message(), {"f32[3]", "[2,4]"}));
  // Broadcasting never shrinks: [3] does not broadcast to [1].
  EXPECT_FALSE(inferOp("BroadcastTo", {f32({3})}, {{"shape", Ints{1}}}));
  EXPECT_FALSE(inferOp("BroadcastTo", {f32({2, 3})}, {{"shape", Ints{3}}}));
  t = inferOp("BroadcastTo", {f32({1})}, {{"shape", Ints{-1}}});
  ASSERT_FALSE(t);
  EXPECT_TRUE(mentions(t.message(), {"negative"}));
}

TEST(BroadcastTo, KernelMatchesNaiveIndexing) {
  const Shape in_shape{3, 1}, out_shape{2, 3, 4};
  Tensor x = randomTensor({DType::F16, in_shape}, 6);
  auto y = runOp("BroadcastTo", {x}, {{"shape", out_shape}});
  ASSERT_TRUE(y) << y.message();
  for (int64_t k = 0; k < (*y)[0].numElements(); ++k) {
    std::vector<int64_t> i = unflatten(k, out_shape);
    EXPECT_EQ((*y)[0].getFloat(k), x.getFloat(i[1])) << k;
  }
}

TEST(SumToShape, InfersRequestedShape) {
  for (const Shape &s : std::vector<Shape>{{3, 1}, {4}, {}, {1, 1, 4}, {2, 3, 4}}) {
    auto t = inferOp("SumToShape", {{DType::BF16, {2, 3, 4}}}, {{"shape", s}});
    ASSERT_TRUE(t) << t.message();
    EXPECT_EQ((*t)[0], (TensorType{DType::BF16, s}));
  }
}

TEST(SumToShape, RejectsShapesThatDoNotBroadcastBack) {
  auto t = inferOp("SumToShape", {f32({2, 3, 4})}, {{"shape", Ints{3}}});
  ASSERT_FALSE(t);
  EXPECT_TRUE(mentions(t.message(), {"shape [3]", "f32[2,3,4]"}));
  EXPECT_FALSE(inferOp("SumToShape", {f32({2, 3})}, {{"shape", Ints{1, 2, 3}}}));
  EXPECT_FALSE(inferOp("SumToShape", {{DType::I32, {2, 3}}}, {{"shape", Ints{3}}}))
      << "floats only";
}

TEST(SumToShape, KernelMatchesNaiveSums) {
  const Shape in_shape{2, 3, 4};
  Tensor x = randomTensor(f32(in_shape), 12);
  struct Case {
    Shape target;
    std::vector<bool> summed; // per input axis
  };
  for (const Case &c : std::vector<Case>{{{3, 1}, {true, false, true}},
                                         {{4}, {true, true, false}},
                                         {{}, {true, true, true}},
                                         {{2, 1, 4}, {false, true, false}}}) {
    auto y = runOp("SumToShape", {x}, {{"shape", c.target}});
    ASSERT_TRUE(y) << y.message();
    std::vector<double> expected((*y)[0].numElements(), 0.0);
    for (int64_t k = 0; k < x.numElements(); ++k) {
      std::vector<int64_t> i = unflatten(k, in_shape);
      int64_t flat = 0;
      for (size_t a = 0; a < 3; ++a)
        if (!c.summed[a])
          flat = flat * in_shape[a] + i[a];
      expected[flat] += x.getFloat(k);
    }
    for (size_t j = 0; j < expected.size(); ++j)
      EXPECT_FLOAT_EQ((*y)[0].getFloat(j), static_cast<float>(expected[j]))
          << shapeToString(c.target) << " element " << j;
  }
}

// 2048 + 1 + 1 accumulated in f16 would stay 2048 (2049 rounds to even);
// accumulating in double and rounding once gives 2050, which f16 holds.
TEST(SumToShape, AccumulatesWideAndRoundsOnce) {
  Tensor x = Tensor::fromFloats(DType::F16, {3}, {2048.0f, 1.0f, 1.0f});
  auto y = runOp("SumToShape", {x}, {{"shape", Ints{}}});
  ASSERT_TRUE(y) << y.message();
  EXPECT_EQ((*y)[0].getFloat(0), 2050.0f);
}

TEST(SumToShape, OverflowFollowsTheMode) {
  Tensor x = Tensor::fromFloats(DType::F16, {2, 1}, {40000.0f, 40000.0f});
  auto inf = runOp("SumToShape", {x}, {{"shape", Ints{1}}}, OverflowMode::InfNan);
  ASSERT_TRUE(inf) << inf.message();
  EXPECT_TRUE(std::isinf((*inf)[0].getFloat(0)));
  auto sat = runOp("SumToShape", {x}, {{"shape", Ints{1}}}, OverflowMode::Saturation);
  ASSERT_TRUE(sat) << sat.message();
  EXPECT_EQ((*sat)[0].getFloat(0), kF16Max);
}

TEST(BroadcastTo, Gradient) {
  EXPECT_TRUE(checkOpGradient("BroadcastTo", {gradInput(f32({3, 1}))}, {{"shape", Ints{2, 3, 4}}}));
  EXPECT_TRUE(checkOpGradient("BroadcastTo", {gradInput(f32({}))}, {{"shape", Ints{3}}}));
  EXPECT_TRUE(checkOpGradient("BroadcastTo", {gradInput(f32({1, 4}))}, {{"shape", Ints{3, 4}}}));
  EXPECT_TRUE(checkOpGradient("BroadcastTo", {gradInput(f32({2, 2}))}, {{"shape", Ints{2, 2}}}));
}

TEST(SumToShape, Gradient) {
  EXPECT_TRUE(checkOpGradient("SumToShape", {gradInput(f32({2, 3, 4}))}, {{"shape", Ints{3, 1}}}));
  EXPECT_TRUE(checkOpGradient("SumToShape", {gradInput(f32({2, 3}))}, {{"shape", Ints{}}}));
  EXPECT_TRUE(checkOpGradient("SumToShape", {gradInput(f32({4, 2}))}, {{"shape", Ints{1, 2}}}));
}

} // namespace
} // namespace kiln::testing
