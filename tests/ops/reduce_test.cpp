// ReduceSum and ReduceMean: axes handling (negative, duplicate, empty = all),
// kernels against naive double loops, f16 accumulation and overflow, and
// finite-difference gradient checks.
#include <gtest/gtest.h>

#include <cmath>

#include "ir/float16.h"
#include "tests/support/gradient_check.h"
#include "tests/support/op_test_util.h"
#include "tests/support/random.h"

namespace kiln::testing {
namespace {

using Ints = std::vector<int64_t>;

TEST(Reduce, InfersShapes) {
  for (const char *op : {"ReduceSum", "ReduceMean"}) {
    auto t = inferOp(op, {{DType::F16, {2, 3, 4}}}, {{"axes", Ints{-1, 0}}});
    ASSERT_TRUE(t) << t.message();
    EXPECT_EQ((*t)[0], (TensorType{DType::F16, {3}}));
    t = inferOp(op, {f32({2, 3, 4})}, {{"axes", Ints{1}}, {"keepdims", true}});
    ASSERT_TRUE(t) << t.message();
    EXPECT_EQ((*t)[0], f32({2, 1, 4}));
    t = inferOp(op, {f32({2, 3, 4})});
    ASSERT_TRUE(t) << t.message();
    EXPECT_EQ((*t)[0], f32({}));
    t = inferOp(op, {f32({2, 3, 4})}, {{"keepdims", true}});
    ASSERT_TRUE(t) << t.message();
    EXPECT_EQ((*t)[0], f32({1, 1, 1}));
  }
}

TEST(Reduce, RejectsBadAxes) {
  auto t = inferOp("ReduceSum", {f32({2, 3, 4})}, {{"axes", Ints{2, -1}}});
  ASSERT_FALSE(t);
  EXPECT_TRUE(mentions(t.message(), {"axes [2,-1]", "axis 2 twice"}));
  t = inferOp("ReduceMean", {f32({2, 3, 4})}, {{"axes", Ints{3}}});
  ASSERT_FALSE(t);
  EXPECT_TRUE(mentions(t.message(), {"axis 3", "out of range", "f32[2,3,4]"}));
  EXPECT_FALSE(inferOp("ReduceSum", {f32({2, 3, 4})}, {{"axes", Ints{-4}}}));
  EXPECT_FALSE(inferOp("ReduceSum", {f32({})}, {{"axes", Ints{0}}}));
  EXPECT_FALSE(inferOp("ReduceSum", {{DType::I32, {2}}})) << "floats only";
  EXPECT_FALSE(inferOp("ReduceSum", {f32({2})}, {{"axes", int64_t{0}}})) << "axes is a list";
}

// Naive reduction: out[j] = sum over x elements whose kept coordinates give j.
std::vector<double> naiveReduce(const Tensor &x, const std::vector<bool> &reduce, bool mean) {
  const Shape &s = x.shape();
  Shape kept;
  int64_t n = 1;
  for (size_t a = 0; a < s.size(); ++a) {
    if (reduce[a])
      n *= s[a];
    else
      kept.push_back(s[a]);
  }
  std::vector<double> out(numElements(kept), 0.0);
  for (int64_t k = 0; k < x.numElements(); ++k) {
    std::vector<int64_t> i = unflatten(k, s);
    int64_t flat = 0;
    for (size_t a = 0; a < s.size(); ++a)
      if (!reduce[a])
        flat = flat * s[a] + i[a];
    out[flat] += x.getFloat(k);
  }
  if (mean)
    for (double &v : out)
      v /= static_cast<double>(n);
  return out;
}

TEST(Reduce, KernelsMatchNaiveLoops) {
  const Shape shape{3, 4, 5};
  Tensor x = randomTensor(f32(shape), 31);
  struct Case {
    Ints axes;
    std::vector<bool> reduce;
  };
  for (bool mean : {false, true})
    for (bool keepdims : {false, true})
      for (const Case &c : std::vector<Case>{{{}, {true, true, true}},
                                             {{1}, {false, true, false}},
                                             {{-1, 0}, {true, false, true}},
                                             {{-2}, {false, true, false}}}) {
        auto y = runOp(mean ? "ReduceMean" : "ReduceSum", {x},
                       {{"axes", c.axes}, {"keepdims", keepdims}});
        ASSERT_TRUE(y) << y.message();
        std::vector<double> expected = naiveReduce(x, c.reduce, mean);
        ASSERT_EQ((*y)[0].numElements(), static_cast<int64_t>(expected.size()));
        for (size_t j = 0; j < expected.size(); ++j)
          EXPECT_FLOAT_EQ((*y)[0].getFloat(j), static_cast<float>(expected[j]))
              << (mean ? "mean" : "sum") << " axes " << shapeToString(c.axes) << " element " << j;
      }
}

TEST(Reduce, F16AccumulatesWideAndRoundsOnce) {
  // Pairwise in f16, 2048 + 1 stays 2048; in double the row sums to 2050.
  Tensor x = Tensor::fromFloats(DType::F16, {1, 3}, {2048.0f, 1.0f, 1.0f});
  auto s = runOp("ReduceSum", {x}, {{"axes", Ints{1}}});
  ASSERT_TRUE(s) << s.message();
  EXPECT_EQ((*s)[0].getFloat(0), 2050.0f);
  // The mean 0.1 + 0.2 + 0.3 over 3 rounds to the f16 nearest 0.2 (from the f16 inputs).
  Tensor y = Tensor::fromFloats(DType::F16, {3}, {0.1f, 0.2f, 0.3f});
  auto m = runOp("ReduceMean", {y});
  ASSERT_TRUE(m) << m.message();
  double exact = (static_cast<double>(y.getFloat(0)) + y.getFloat(1) + y.getFloat(2)) / 3.0;
  EXPECT_EQ((*m)[0].getFloat(0),
            halfToFloat(floatToHalf(static_cast<float>(exact), OverflowMode::InfNan)));
}

TEST(Reduce, BF16Rounding) {
  Tensor x = randomTensor({DType::BF16, {4, 8}}, 3);
  auto y = runOp("ReduceSum", {x}, {{"axes", Ints{-1}}});
  ASSERT_TRUE(y) << y.message();
  std::vector<double> expected = naiveReduce(x, {false, true}, false);
  for (int64_t r = 0; r < 4; ++r)
    EXPECT_EQ((*y)[0].getFloat(r), bfloat16ToFloat(floatToBFloat16(static_cast<float>(expected[r]),
                                                                   OverflowMode::InfNan)));
}

TEST(Reduce, OverflowFollowsTheMode) {
  Tensor x = Tensor::fromFloats(DType::F16, {2}, {60000.0f, 60000.0f});
  auto inf = runOp("ReduceSum", {x}, {}, OverflowMode::InfNan);
  ASSERT_TRUE(inf) << inf.message();
  EXPECT_TRUE(std::isinf((*inf)[0].getFloat(0)));
  auto sat = runOp("ReduceSum", {x}, {}, OverflowMode::Saturation);
  ASSERT_TRUE(sat) << sat.message();
  EXPECT_EQ((*sat)[0].getFloat(0), kF16Max);
  // The mean of the same values fits: the wide accumulator does not overflow.
  auto mean = runOp("ReduceMean", {x}, {}, OverflowMode::InfNan);
  ASSERT_TRUE(mean) << mean.message();
  EXPECT_EQ((*mean)[0].getFloat(0), 60000.0f);
}

TEST(ReduceSum, Gradient) {
  EXPECT_TRUE(checkOpGradient("ReduceSum", {gradInput(f32({2, 3, 4}))}));
  EXPECT_TRUE(checkOpGradient("ReduceSum", {gradInput(f32({2, 3, 4}))}, {{"axes", Ints{-1, 0}}}));
  EXPECT_TRUE(checkOpGradient("ReduceSum", {gradInput(f32({2, 3, 4}))},
                              {{"axes", Ints{1}}, {"keepdims", true}}));
  EXPECT_TRUE(checkOpGradient("ReduceSum", {gradInput(f32({5}))}, {{"axes", Ints{0}}}));
}

TEST(ReduceMean, Gradient) {
  EXPECT_TRUE(checkOpGradient("ReduceMean", {gradInput(f32({2, 3, 4}))}));
  EXPECT_TRUE(checkOpGradient("ReduceMean", {gradInput(f32({2, 3, 4}))}, {{"axes", Ints{-2}}}));
  EXPECT_TRUE(checkOpGradient("ReduceMean", {gradInput(f32({3, 1, 4}))},
                              {{"axes", Ints{0, 1}}, {"keepdims", true}}));
}

} // namespace
} // namespace kiln::testing
