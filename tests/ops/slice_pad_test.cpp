// Slice and Pad: shape inference, kernels against naive index arithmetic, the
// pad value's rounding and overflow, and finite-difference gradient checks.
#include <gtest/gtest.h>

#include <cmath>

#include "ir/float16.h"
#include "tests/support/gradient_check.h"
#include "tests/support/op_test_util.h"
#include "tests/support/random.h"

namespace kiln::testing {
namespace {

using Ints = std::vector<int64_t>;

TEST(Slice, InfersBoxShape) {
  auto t = inferOp("Slice", {{DType::F16, {4, 5, 6}}},
                   {{"begin", Ints{1, 0, 2}}, {"end", Ints{3, 5, 2}}});
  ASSERT_TRUE(t) << t.message();
  EXPECT_EQ((*t)[0], (TensorType{DType::F16, {2, 5, 0}}));
}

TEST(Slice, RejectsBadBounds) {
  auto bad = [](Ints begin, Ints end) {
    return inferOp("Slice", {f32({4, 5})}, {{"begin", begin}, {"end", end}});
  };
  auto t = bad({0}, {4});
  ASSERT_FALSE(t);
  EXPECT_TRUE(mentions(t.message(), {"begin [0]", "one per axis", "f32[4,5]"}));
  t = bad({0, 0}, {4, 6});
  ASSERT_FALSE(t);
  EXPECT_TRUE(mentions(t.message(), {"axis 1", "end 6", "<= 5"}));
  t = bad({3, 0}, {2, 5});
  ASSERT_FALSE(t);
  EXPECT_TRUE(mentions(t.message(), {"axis 0", "begin 3", "end 2"}));
  EXPECT_FALSE(bad({-1, 0}, {2, 5}));
  auto missing = inferOp("Slice", {f32({4, 5})}, {{"begin", Ints{0, 0}}});
  EXPECT_FALSE(missing) << "end is required";
}

TEST(Slice, KernelMatchesNaiveIndexing) {
  const Shape shape{3, 4, 5};
  const Ints begin{1, 0, 2}, end{3, 3, 5};
  for (DType dtype : {DType::F32, DType::BF16, DType::I32}) {
    Tensor x = dtype == DType::I32 ? randomIndices({dtype, shape}, 3, 1000)
                                   : randomTensor({dtype, shape}, 3);
    auto y = runOp("Slice", {x}, {{"begin", begin}, {"end", end}});
    ASSERT_TRUE(y) << y.message();
    const Tensor &out = (*y)[0];
    ASSERT_EQ(out.shape(), (Shape{2, 3, 3}));
    for (int64_t k = 0; k < out.numElements(); ++k) {
      std::vector<int64_t> i = unflatten(k, out.shape());
      for (size_t a = 0; a < i.size(); ++a)
        i[a] += begin[a];
      EXPECT_EQ(out.getFloat(k), x.getFloat(flatten(i, shape)));
    }
  }
}

TEST(Slice, EmptyResult) {
  auto y =
      runOp("Slice", {randomTensor(f32({3, 4}), 1)}, {{"begin", Ints{1, 2}}, {"end", Ints{1, 4}}});
  ASSERT_TRUE(y) << y.message();
  EXPECT_EQ((*y)[0].numElements(), 0);
}

TEST(Slice, Gradient) {
  EXPECT_TRUE(
      checkOpGradient("Slice", {gradInput(f32({5}))}, {{"begin", Ints{1}}, {"end", Ints{4}}}));
  EXPECT_TRUE(checkOpGradient("Slice", {gradInput(f32({3, 4, 5}))},
                              {{"begin", Ints{0, 1, 2}}, {"end", Ints{2, 4, 5}}}));
  EXPECT_TRUE(checkOpGradient("Slice", {gradInput(f32({2, 6}))},
                              {{"begin", Ints{0, 0}}, {"end", Ints{2, 6}}}));
}

TEST(Pad, InfersPaddedShape) {
  auto t = inferOp("Pad", {f32({2, 3})}, {{"before", Ints{1, 0}}, {"after", Ints{2, 4}}});
  ASSERT_TRUE(t) << t.message();
  EXPECT_EQ((*t)[0], f32({5, 7}));
}

TEST(Pad, RejectsBadPadding) {
  auto t = inferOp("Pad", {f32({2, 3})}, {{"before", Ints{1, -1}}, {"after", Ints{0, 0}}});
  ASSERT_FALSE(t);
  EXPECT_TRUE(mentions(t.message(), {"axis 1", "before -1", ">= 0"}));
  t = inferOp("Pad", {f32({2, 3})}, {{"before", Ints{1, 1}}, {"after", Ints{0}}});
  ASSERT_FALSE(t);
  EXPECT_TRUE(mentions(t.message(), {"after [0]", "one per axis"}));
}

TEST(Pad, KernelMatchesNaiveIndexing) {
  const Shape shape{2, 3, 2};
  const Ints before{1, 0, 2}, after{0, 2, 1};
  Tensor x = randomTensor(f32(shape), 8);
  auto y = runOp("Pad", {x}, {{"before", before}, {"after", after}, {"value", 2.5}});
  ASSERT_TRUE(y) << y.message();
  const Tensor &out = (*y)[0];
  ASSERT_EQ(out.shape(), (Shape{3, 5, 5}));
  for (int64_t k = 0; k < out.numElements(); ++k) {
    std::vector<int64_t> i = unflatten(k, out.shape());
    bool inside = true;
    for (size_t a = 0; a < i.size(); ++a) {
      i[a] -= before[a];
      inside = inside && i[a] >= 0 && i[a] < shape[a];
    }
    EXPECT_EQ(out.getFloat(k), inside ? x.getFloat(flatten(i, shape)) : 2.5f) << k;
  }
}

TEST(Pad, IntegerTensorsGetAnIntegerValue) {
  Tensor x = Tensor::fromInts(DType::I64, {2}, {7, 8});
  auto y = runOp("Pad", {x}, {{"before", Ints{1}}, {"after", Ints{1}}, {"value", -3.0}});
  ASSERT_TRUE(y) << y.message();
  EXPECT_EQ((*y)[0].getInt(0), -3);
  EXPECT_EQ((*y)[0].getInt(1), 7);
  EXPECT_EQ((*y)[0].getInt(2), 8);
  EXPECT_EQ((*y)[0].getInt(3), -3);
}

TEST(Pad, ValueRoundsToTheStorageTypeInBothOverflowModes) {
  Tensor x = Tensor::fromFloats(DType::F16, {1}, {1.0f});
  const AttrMap pad01{{"before", Ints{1}}, {"after", Ints{0}}, {"value", 0.1}};
  auto y = runOp("Pad", {x}, pad01);
  ASSERT_TRUE(y) << y.message();
  EXPECT_EQ((*y)[0].getFloat(0), halfToFloat(floatToHalf(0.1f, OverflowMode::InfNan)));
  EXPECT_NE((*y)[0].getFloat(0), 0.1f);

  const AttrMap big{{"before", Ints{1}}, {"after", Ints{0}}, {"value", 1e5}};
  auto inf = runOp("Pad", {x}, big, OverflowMode::InfNan);
  ASSERT_TRUE(inf) << inf.message();
  EXPECT_TRUE(std::isinf((*inf)[0].getFloat(0)));
  auto sat = runOp("Pad", {x}, big, OverflowMode::Saturation);
  ASSERT_TRUE(sat) << sat.message();
  EXPECT_EQ((*sat)[0].getFloat(0), kF16Max);
  EXPECT_EQ((*sat)[0].getFloat(1), 1.0f);
}

TEST(Pad, Gradient) {
  EXPECT_TRUE(checkOpGradient("Pad", {gradInput(f32({3}))},
                              {{"before", Ints{2}}, {"after", Ints{1}}, {"value", 1.0}}));
  EXPECT_TRUE(checkOpGradient("Pad", {gradInput(f32({2, 3, 2}))},
                              {{"before", Ints{1, 0, 2}}, {"after", Ints{0, 2, 1}}}));
}

TEST(SliceAndPad, PadThenSliceIsIdentity) {
  Tensor x = randomTensor({DType::BF16, {3, 2}}, 4);
  auto p = runOp("Pad", {x}, {{"before", Ints{1, 2}}, {"after", Ints{3, 0}}});
  ASSERT_TRUE(p) << p.message();
  auto s = runOp("Slice", {(*p)[0]}, {{"begin", Ints{1, 2}}, {"end", Ints{4, 4}}});
  ASSERT_TRUE(s) << s.message();
  EXPECT_EQ((*s)[0], x);
}

} // namespace
} // namespace kiln::testing
