// Reshape, Transpose and RotateHalf: shape inference, kernels against naive
// index arithmetic, and finite-difference checks of their gradient rules.
#include <gtest/gtest.h>

#include <cmath>

#include "ir/float16.h"
#include "tests/support/gradient_check.h"
#include "tests/support/op_test_util.h"
#include "tests/support/random.h"

namespace kiln::testing {
namespace {

using Ints = std::vector<int64_t>;

// --- Reshape -----------------------------------------------------------------

TEST(Reshape, InfersTheMinusOneDimension) {
  auto t = inferOp("Reshape", {f32({2, 3, 4})}, {{"shape", Ints{6, -1}}});
  ASSERT_TRUE(t) << t.message();
  EXPECT_EQ((*t)[0], f32({6, 4}));
  t = inferOp("Reshape", {{DType::I64, {2, 3, 4}}}, {{"shape", Ints{-1}}});
  ASSERT_TRUE(t) << t.message();
  EXPECT_EQ((*t)[0], (TensorType{DType::I64, {24}}));
  t = inferOp("Reshape", {f32({1})}, {{"shape", Ints{}}});
  ASSERT_TRUE(t) << t.message();
  EXPECT_EQ((*t)[0], f32({}));
}

TEST(Reshape, RejectsBadShapes) {
  auto t = inferOp("Reshape", {f32({2, 3, 4})}, {{"shape", Ints{5, 5}}});
  ASSERT_FALSE(t);
  EXPECT_TRUE(mentions(t.message(), {"[2,3,4]", "[5,5]", "24", "25"}));
  t = inferOp("Reshape", {f32({2, 3, 4})}, {{"shape", Ints{-1, -1}}});
  ASSERT_FALSE(t);
  EXPECT_TRUE(mentions(t.message(), {"more than one -1"}));
  t = inferOp("Reshape", {f32({2, 3, 4})}, {{"shape", Ints{-1, 5}}});
  ASSERT_FALSE(t);
  EXPECT_TRUE(mentions(t.message(), {"[-1,5]", "24"}));
  t = inferOp("Reshape", {f32({2, 3, 4})}, {{"shape", Ints{-2, -12}}});
  ASSERT_FALSE(t);
  EXPECT_TRUE(mentions(t.message(), {"-2"}));
  t = inferOp("Reshape", {f32({0, 3})}, {{"shape", Ints{0, -1}}});
  EXPECT_FALSE(t) << "-1 next to a zero dimension is ambiguous";
}

// Found by tests/fuzz (a graph file's Reshape): a target shape whose element
// count overflows 64 bits was signed-overflow UB; it is an error.
TEST(Reshape, RejectsAShapeWhoseElementCountOverflows) {
  const int64_t big = int64_t{1} << 40;
  auto t = inferOp("Reshape", {f32({4, 8})}, {{"shape", Ints{big, big, big}}});
  ASSERT_FALSE(t);
  EXPECT_TRUE(mentions(t.message(), {"[1099511627776,", "more elements than a 64-bit count"}));
  t = inferOp("Reshape", {f32({4, 8})}, {{"shape", Ints{big, -1, big}}});
  ASSERT_FALSE(t);
}

TEST(Reshape, KeepsRowMajorOrderAndExactBits) {
  std::vector<int64_t> values;
  for (int64_t i = 0; i < 12; ++i)
    values.push_back((int64_t{1} << 40) + i); // not representable as float
  Tensor x = Tensor::fromInts(DType::I64, {3, 4}, values);
  auto y = runOp("Reshape", {x}, {{"shape", Ints{2, -1, 3}}});
  ASSERT_TRUE(y) << y.message();
  EXPECT_EQ((*y)[0].shape(), (Shape{2, 2, 3}));
  for (int64_t i = 0; i < 12; ++i)
    EXPECT_EQ((*y)[0].getInt(i), values[i]);
}

TEST(Reshape, Gradient) {
  EXPECT_TRUE(checkOpGradient("Reshape", {gradInput(f32({2, 3, 4}))}, {{"shape", Ints{4, -1}}}));
  EXPECT_TRUE(checkOpGradient("Reshape", {gradInput(f32({6}))}, {{"shape", Ints{1, 2, 1, 3}}}));
  EXPECT_TRUE(checkOpGradient("Reshape", {gradInput(f32({1}))}, {{"shape", Ints{}}}));
}

// --- Transpose ---------------------------------------------------------------

TEST(Transpose, InfersPermutedShape) {
  auto t = inferOp("Transpose", {{DType::BF16, {2, 3, 4}}}, {{"perm", Ints{2, 0, 1}}});
  ASSERT_TRUE(t) << t.message();
  EXPECT_EQ((*t)[0], (TensorType{DType::BF16, {4, 2, 3}}));
}

TEST(Transpose, RejectsNonPermutations) {
  auto t = inferOp("Transpose", {f32({2, 3, 4})}, {{"perm", Ints{1, 0}}});
  ASSERT_FALSE(t);
  EXPECT_TRUE(mentions(t.message(), {"perm [1,0]", "one per axis"}));
  t = inferOp("Transpose", {f32({2, 3, 4})}, {{"perm", Ints{0, 1, 1}}});
  ASSERT_FALSE(t);
  EXPECT_TRUE(mentions(t.message(), {"repeats axis 1"}));
  t = inferOp("Transpose", {f32({2, 3, 4})}, {{"perm", Ints{0, 1, 3}}});
  ASSERT_FALSE(t);
  EXPECT_TRUE(mentions(t.message(), {"entry 3"}));
  t = inferOp("Transpose", {f32({2, 3})}, {{"perm", Ints{-1, 0}}});
  ASSERT_FALSE(t);
  EXPECT_TRUE(mentions(t.message(), {"entry -1"}));
}

// y[i_0..i_r] = x[j] with j[perm[a]] = i[a].
void expectTransposeMatchesNaive(DType dtype, const Shape &shape, const Ints &perm) {
  Tensor x = randomTensor({dtype, shape}, 17);
  auto y = runOp("Transpose", {x}, {{"perm", perm}});
  ASSERT_TRUE(y) << y.message();
  const Tensor &out = (*y)[0];
  for (int64_t k = 0; k < out.numElements(); ++k) {
    std::vector<int64_t> i = unflatten(k, out.shape());
    std::vector<int64_t> j(shape.size());
    for (size_t a = 0; a < perm.size(); ++a)
      j[perm[a]] = i[a];
    ASSERT_EQ(out.getFloat(k), x.getFloat(flatten(j, shape))) << "element " << k;
  }
}

TEST(Transpose, KernelMatchesNaiveIndexing) {
  expectTransposeMatchesNaive(DType::F32, {2, 3, 4}, {2, 0, 1});
  expectTransposeMatchesNaive(DType::F16, {2, 3, 4, 5}, {0, 2, 1, 3});
  expectTransposeMatchesNaive(DType::BF16, {3, 1, 4, 2}, {3, 2, 1, 0});
  expectTransposeMatchesNaive(DType::F32, {5}, {0});
}

TEST(Transpose, Gradient) {
  EXPECT_TRUE(checkOpGradient("Transpose", {gradInput(f32({2, 3}))}, {{"perm", Ints{1, 0}}}));
  EXPECT_TRUE(checkOpGradient("Transpose", {gradInput(f32({2, 3, 4}))}, {{"perm", Ints{2, 0, 1}}}));
  EXPECT_TRUE(
      checkOpGradient("Transpose", {gradInput(f32({2, 1, 3, 2}))}, {{"perm", Ints{1, 3, 0, 2}}}));
}

// --- RotateHalf --------------------------------------------------------------

TEST(RotateHalf, InfersAndRejects) {
  auto t = inferOp("RotateHalf", {{DType::F16, {2, 3, 8}}});
  ASSERT_TRUE(t) << t.message();
  EXPECT_EQ((*t)[0], (TensorType{DType::F16, {2, 3, 8}}));
  t = inferOp("RotateHalf", {f32({2, 5})});
  ASSERT_FALSE(t);
  EXPECT_TRUE(mentions(t.message(), {"f32[2,5]", "even last dimension"}));
  EXPECT_FALSE(inferOp("RotateHalf", {f32({})}));
  EXPECT_FALSE(inferOp("RotateHalf", {{DType::I32, {4}}})) << "floats only";
}

TEST(RotateHalf, MatchesHuggingFaceDefinition) {
  for (DType dtype : {DType::F32, DType::F16, DType::BF16}) {
    const Shape shape{2, 3, 6};
    Tensor x = randomTensor({dtype, shape}, 5);
    auto y = runOp("RotateHalf", {x});
    ASSERT_TRUE(y) << y.message();
    for (int64_t r = 0; r < 6; ++r)
      for (int64_t j = 0; j < 6; ++j) {
        // concat(-x2, x1): the first half reads the negated second half.
        float expected = j < 3 ? -x.getFloat(r * 6 + j + 3) : x.getFloat(r * 6 + j - 3);
        EXPECT_EQ((*y)[0].getFloat(r * 6 + j), expected) << dtypeName(dtype);
      }
  }
}

TEST(RotateHalf, TwiceIsNegation) {
  Tensor x = randomTensor(f32({4, 8}), 9);
  auto y = runOp("RotateHalf", {x});
  ASSERT_TRUE(y);
  auto z = runOp("RotateHalf", {(*y)[0]});
  ASSERT_TRUE(z);
  for (int64_t i = 0; i < x.numElements(); ++i)
    EXPECT_EQ((*z)[0].getFloat(i), -x.getFloat(i));
}

TEST(RotateHalf, Gradient) {
  EXPECT_TRUE(checkOpGradient("RotateHalf", {gradInput(f32({4}))}));
  EXPECT_TRUE(checkOpGradient("RotateHalf", {gradInput(f32({2, 3, 8}))}));
}

} // namespace
} // namespace kiln::testing
