// Softmax and SoftmaxGrad: inference, kernels against a naive double softmax
// on every axis, f16/bf16 rounding of the outputs, stability for large inputs,
// and finite-difference checks of Softmax's gradient rule.
#include <gtest/gtest.h>

#include <cmath>

#include "ir/float16.h"
#include "ops/op_registry.h"
#include "tests/support/gradient_check.h"
#include "tests/support/op_test_util.h"
#include "tests/support/random.h"

namespace kiln::testing {
namespace {

// Softmax along `axis` (non-negative) computed directly from the definition.
std::vector<double> naiveSoftmax(const Tensor &x, int64_t axis) {
  const Shape &s = x.shape();
  std::vector<double> out(x.numElements());
  for (int64_t k = 0; k < x.numElements(); ++k) {
    std::vector<int64_t> i = unflatten(k, s);
    double max = -INFINITY;
    for (i[axis] = 0; i[axis] < s[axis]; ++i[axis])
      max = std::max(max, static_cast<double>(x.getFloat(flatten(i, s))));
    double sum = 0;
    for (i[axis] = 0; i[axis] < s[axis]; ++i[axis])
      sum += std::exp(x.getFloat(flatten(i, s)) - max);
    out[k] = std::exp(x.getFloat(k) - max) / sum;
  }
  return out;
}

TEST(Softmax, InfersAndRejectsAxes) {
  auto t = inferOp("Softmax", {{DType::F16, {2, 3}}});
  ASSERT_TRUE(t) << t.message();
  EXPECT_EQ((*t)[0], (TensorType{DType::F16, {2, 3}}));
  t = inferOp("Softmax", {f32({2, 3})}, {{"axis", int64_t{2}}});
  ASSERT_FALSE(t);
  EXPECT_TRUE(mentions(t.message(), {"axis 2", "rank 2"}));
  t = inferOp("Softmax", {f32({2, 3})}, {{"axis", int64_t{-3}}});
  ASSERT_FALSE(t);
  EXPECT_TRUE(mentions(t.message(), {"axis -3"}));
  EXPECT_FALSE(inferOp("Softmax", {{DType::I64, {2, 3}}})) << "floats only";
}

TEST(Softmax, MatchesNaiveOnEveryAxis) {
  const Shape shape{3, 4, 5};
  Tensor x = randomTensor(f32(shape), 44, -4.0f, 4.0f);
  for (int64_t axis : {0, 1, 2, -1, -2, -3}) {
    auto y = runOp("Softmax", {x}, {{"axis", axis}});
    ASSERT_TRUE(y) << y.message();
    std::vector<double> expected = naiveSoftmax(x, axis < 0 ? axis + 3 : axis);
    for (size_t k = 0; k < expected.size(); ++k)
      EXPECT_FLOAT_EQ((*y)[0].getFloat(k), static_cast<float>(expected[k]))
          << "axis " << axis << " element " << k;
  }
}

TEST(Softmax, LargeInputsStayFinite) {
  // exp(1000) overflows even a double; subtracting the max keeps it finite.
  Tensor x = Tensor::fromFloats(DType::F32, {3}, {1000.0f, 1000.0f, 999.0f});
  auto y = runOp("Softmax", {x});
  ASSERT_TRUE(y) << y.message();
  const double e = std::exp(-1.0);
  EXPECT_FLOAT_EQ((*y)[0].getFloat(0), static_cast<float>(1.0 / (2.0 + e)));
  EXPECT_FLOAT_EQ((*y)[0].getFloat(2), static_cast<float>(e / (2.0 + e)));
  // Large f16 inputs (65504 is the f16 maximum) too.
  Tensor h = Tensor::fromFloats(DType::F16, {2}, {65504.0f, 65504.0f});
  auto z = runOp("Softmax", {h});
  ASSERT_TRUE(z) << z.message();
  EXPECT_EQ((*z)[0].getFloat(0), 0.5f);
  EXPECT_EQ((*z)[0].getFloat(1), 0.5f);
}

TEST(Softmax, SixteenBitOutputsRoundToNearestEven) {
  const Shape shape{4, 7};
  for (DType dtype : {DType::F16, DType::BF16}) {
    Tensor x = randomTensor({dtype, shape}, 12, -3.0f, 3.0f);
    auto y = runOp("Softmax", {x}, {{"axis", int64_t{-1}}});
    ASSERT_TRUE(y) << y.message();
    std::vector<double> expected = naiveSoftmax(x, 1);
    for (size_t k = 0; k < expected.size(); ++k) {
      float f = static_cast<float>(expected[k]);
      float rounded = dtype == DType::F16
                          ? halfToFloat(floatToHalf(f, OverflowMode::InfNan))
                          : bfloat16ToFloat(floatToBFloat16(f, OverflowMode::InfNan));
      EXPECT_EQ((*y)[0].getFloat(k), rounded) << dtypeName(dtype) << " element " << k;
    }
  }
}

TEST(Softmax, OneElementRowsAreOne) {
  auto y = runOp("Softmax", {randomTensor(f32({3, 1}), 2)}, {{"axis", int64_t{1}}});
  ASSERT_TRUE(y) << y.message();
  for (int64_t k = 0; k < 3; ++k)
    EXPECT_EQ((*y)[0].getFloat(k), 1.0f);
}

TEST(SoftmaxGrad, InfersAndRejects) {
  auto t = inferOp("SoftmaxGrad", {f32({2, 3}), f32({2, 3})}, {{"axis", int64_t{0}}});
  ASSERT_TRUE(t) << t.message();
  EXPECT_EQ((*t)[0], f32({2, 3}));
  t = inferOp("SoftmaxGrad", {f32({2, 3}), f32({3, 2})});
  ASSERT_FALSE(t);
  EXPECT_TRUE(mentions(t.message(), {"f32[2,3]", "f32[3,2]"}));
  EXPECT_FALSE(inferOp("SoftmaxGrad", {f32({2, 3}), {DType::F16, {2, 3}}}));
  EXPECT_FALSE(inferOp("SoftmaxGrad", {f32({2, 3}), f32({2, 3})}, {{"axis", int64_t{5}}}));
}

TEST(SoftmaxGrad, MatchesFormula) {
  const Shape shape{3, 4};
  Tensor y = randomTensor(f32(shape), 1, 0.0f, 1.0f);
  Tensor dy = randomTensor(f32(shape), 2);
  for (int64_t axis : {0, -1}) {
    const int64_t a = axis < 0 ? axis + 2 : axis;
    auto dx = runOp("SoftmaxGrad", {y, dy}, {{"axis", axis}});
    ASSERT_TRUE(dx) << dx.message();
    for (int64_t k = 0; k < y.numElements(); ++k) {
      std::vector<int64_t> i = unflatten(k, shape);
      double dot = 0;
      for (i[a] = 0; i[a] < shape[a]; ++i[a])
        dot += static_cast<double>(y.getFloat(flatten(i, shape))) * dy.getFloat(flatten(i, shape));
      double expected = y.getFloat(k) * (dy.getFloat(k) - dot);
      EXPECT_FLOAT_EQ((*dx)[0].getFloat(k), static_cast<float>(expected)) << k;
    }
  }
}

TEST(SoftmaxGrad, HasNoGradientRule) {
  const ops::RegisteredOp *reg = ops::OpRegistry::builtin().find("SoftmaxGrad");
  ASSERT_NE(reg, nullptr);
  EXPECT_FALSE(static_cast<bool>(reg->impl.grad));
}

TEST(Softmax, Gradient) {
  EXPECT_TRUE(checkOpGradient("Softmax", {gradInput(f32({5}))}));
  EXPECT_TRUE(checkOpGradient("Softmax", {gradInput(f32({2, 3, 4}))}, {{"axis", int64_t{1}}}));
  EXPECT_TRUE(checkOpGradient("Softmax",
                              {
                                  gradInput(f32({3, 4})),
                              },
                              {{"axis", int64_t{-2}}}));
  EXPECT_TRUE(checkOpGradient("Softmax", {gradInput(f32({2, 6}), -3.0f, 3.0f)}));
}

} // namespace
} // namespace kiln::testing
