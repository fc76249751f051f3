// Tests of CausalMask: shape inference, the mask pattern for square and
// rectangular (KV-cache) scores, the stored fill per dtype and overflow mode,
// and the gradient check.
#include <cmath>
#include <cstdint>
#include <limits>

#include <gtest/gtest.h>

#include "ir/float16.h"
#include "tests/support/gradient_check.h"
#include "tests/support/op_test_util.h"
#include "tests/support/random.h"

namespace kiln::testing {
namespace {

TEST(CausalMaskInfer, GoodAndBad) {
  for (Shape s : {Shape{4, 4}, Shape{2, 3, 5}, Shape{2, 4, 3, 3}}) {
    auto t = inferOp("CausalMask", {f32(s)}, {{"fill", -1e4}});
    ASSERT_TRUE(t) << t.message();
    EXPECT_EQ((*t)[0], f32(s));
  }
  auto rank1 = inferOp("CausalMask", {f32({4})}, {{"fill", -1e4}});
  ASSERT_FALSE(rank1);
  EXPECT_NE(rank1.message().find("rank >= 2"), std::string::npos) << rank1.message();
  EXPECT_FALSE(inferOp("CausalMask", {f32({})}, {{"fill", -1e4}}));
  EXPECT_FALSE(inferOp("CausalMask", {TensorType{DType::I32, {2, 2}}}, {{"fill", -1.0}}));
  EXPECT_FALSE(inferOp("CausalMask", {f32({2, 2})})); // fill is required
}

// Checks y against the rule: key j is hidden from query i when j - i > keys - queries.
void checkPattern(const Shape &shape, float fill) {
  Tensor x = randomTensor(f32(shape), 42);
  Tensor y = run1("CausalMask", {x}, {{"fill", double(fill)}});
  ASSERT_EQ(y.type(), x.type());
  const int64_t q = shape[shape.size() - 2], k = shape.back();
  const int64_t batches = x.numElements() / (q * k);
  for (int64_t b = 0; b < batches; ++b)
    for (int64_t i = 0; i < q; ++i)
      for (int64_t j = 0; j < k; ++j) {
        const int64_t e = b * q * k + i * k + j;
        const bool hidden = j - i > k - q;
        EXPECT_EQ(y.getFloat(e), hidden ? fill : x.getFloat(e))
            << shapeToString(shape) << " batch " << b << " query " << i << " key " << j;
      }
}

TEST(CausalMaskKernel, SquareScoresHideTheFuture) {
  checkPattern({4, 4}, -1e4f);
  checkPattern({2, 3, 5, 5}, -1e4f);
  // The diagonal stays visible, the upper triangle is filled.
  Tensor x = Tensor::fromFloats(DType::F32, {3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  Tensor y = run1("CausalMask", {x}, {{"fill", -100.0}});
  EXPECT_EQ(y.toFloats(), (std::vector<float>{1, -100, -100, 4, 5, -100, 7, 8, 9}));
}

TEST(CausalMaskKernel, FewerQueriesThanKeys) {
  // Two new queries against five cached keys sit at positions 3 and 4.
  Tensor x = Tensor::fromFloats(DType::F32, {2, 5}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10});
  Tensor y = run1("CausalMask", {x}, {{"fill", 0.0}});
  EXPECT_EQ(y.toFloats(), (std::vector<float>{1, 2, 3, 4, 0, 6, 7, 8, 9, 10}));
  checkPattern({3, 2, 6}, -5.0f);
}

TEST(CausalMaskKernel, MoreQueriesThanKeys) {
  checkPattern({5, 3}, -5.0f);
  Tensor x = Tensor::fromFloats(DType::F32, {3, 2}, {1, 2, 3, 4, 5, 6});
  Tensor y = run1("CausalMask", {x}, {{"fill", -1.0}});
  // Query 0 sees no key, query 1 the first, query 2 both.
  EXPECT_EQ(y.toFloats(), (std::vector<float>{-1, -1, 3, -1, 5, 6}));
}

TEST(CausalMaskKernel, FillIsStoredInTheOutputDType) {
  // Qwen passes finfo(dtype).min; each is exact in its own dtype.
  const double f16_min = -65504.0;
  const double bf16_min = -3.3895313892515355e38;
  const double f32_min = -std::numeric_limits<float>::max();
  struct Case {
    DType dtype;
    double fill;
  };
  for (Case c :
       {Case{DType::F16, f16_min}, Case{DType::BF16, bf16_min}, Case{DType::F32, f32_min}}) {
    Tensor x = Tensor::fromFloats(c.dtype, {2, 2}, {1, 2, 3, 4});
    for (OverflowMode mode : {OverflowMode::InfNan, OverflowMode::Saturation}) {
      Tensor y = run1("CausalMask", {x}, {{"fill", c.fill}}, mode);
      EXPECT_EQ(y.getFloat(1), static_cast<float>(c.fill)) << dtypeName(c.dtype);
      EXPECT_EQ(y.getFloat(0), 1.0f);
    }
  }
}

TEST(CausalMaskKernel, FillBelowTheRangeFollowsTheMode) {
  // The f32 minimum does not fit f16: -inf under INFNAN, -65504 under SATURATION.
  Tensor x = Tensor::fromFloats(DType::F16, {2, 2}, {1, 2, 3, 4});
  const double fill = -std::numeric_limits<float>::max();
  Tensor ieee = run1("CausalMask", {x}, {{"fill", fill}}, OverflowMode::InfNan);
  EXPECT_TRUE(std::isinf(ieee.getFloat(1)) && ieee.getFloat(1) < 0);
  Tensor sat = run1("CausalMask", {x}, {{"fill", fill}}, OverflowMode::Saturation);
  EXPECT_EQ(sat.getFloat(1), -kF16Max);
  // Rounding of an in-range fill: -1e4 + 3 is not an f16 value (spacing 8 there).
  Tensor r = run1("CausalMask", {x}, {{"fill", -10003.0}});
  EXPECT_EQ(r.getFloat(1), -10000.0f);
}

TEST(CausalMaskGradient, FiniteDifferences) {
  for (Shape s : {Shape{4, 4}, Shape{2, 3, 5}, Shape{3, 2}})
    EXPECT_TRUE(checkOpGradient("CausalMask", {gradInput(f32(s))}, {{"fill", -1e4}}))
        << shapeToString(s);
}

TEST(CausalMaskGradient, MasksWithZero) {
  Graph g;
  ValueId x = g.addInput("x", f32({2, 2}), InputRole::Data);
  ops::OpBuilder b(g);
  auto y = b.tryCreate("CausalMask", "mask", {x}, {{"fill", -65504.0}});
  ASSERT_TRUE(y) << y.message();
  ValueId dy = g.addInput("dy", f32({2, 2}), InputRole::Data);
  ops::GradContext ctx{b, g.node(g.value((*y)[0]).producer), {dy}};
  auto grads = ops::OpRegistry::builtin().find("CausalMask")->impl.grad(ctx);
  ASSERT_TRUE(grads) << grads.message();
  const Node &dx = g.node(g.value((*grads)[0]).producer);
  EXPECT_EQ(dx.op, "CausalMask");
  EXPECT_EQ(dx.attrs.getFloat("fill"), 0.0);
}

} // namespace
} // namespace kiln::testing
