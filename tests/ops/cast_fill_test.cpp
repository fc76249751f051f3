// Tests of Cast (rounding, overflow modes, truncation, bool) and Fill
// (attribute checks, stored values), with the Cast gradient check.
#include <cmath>
#include <cstdint>
#include <limits>

#include <gtest/gtest.h>

#include "ir/float16.h"
#include "tests/support/gradient_check.h"
#include "tests/support/op_test_util.h"

namespace kiln::testing {
namespace {

const OverflowMode kInfNan = OverflowMode::InfNan;
const OverflowMode kSat = OverflowMode::Saturation;
const float kNaN = std::numeric_limits<float>::quiet_NaN();

Tensor cast(const Tensor &x, DType to, OverflowMode mode = kInfNan) {
  return run1("Cast", {x}, {{"dtype", to}}, mode);
}

// ---- Cast: shape inference ----

TEST(CastInfer, TakesTheTargetDType) {
  for (DType from : kAllDTypes)
    for (DType to : kAllDTypes) {
      auto t = inferOp("Cast", {TensorType{from, {2, 3}}}, {{"dtype", to}});
      ASSERT_TRUE(t) << t.message();
      EXPECT_EQ((*t)[0], (TensorType{to, {2, 3}}));
    }
}

TEST(CastInfer, RequiresTheDTypeAttribute) {
  auto t = inferOp("Cast", {TensorType{DType::F32, {2}}});
  ASSERT_FALSE(t);
  EXPECT_NE(t.message().find("dtype"), std::string::npos) << t.message();
  EXPECT_FALSE(inferOp("Cast", {TensorType{DType::F32, {2}}}, {{"dtype", int64_t(3)}}));
  EXPECT_FALSE(inferOp("Cast", {}, {{"dtype", DType::F16}}));
}

// ---- Cast: kernel ----

TEST(CastKernel, F32ToF16RoundsToNearestEven) {
  const float ulp_half = std::ldexp(1.0f, -11); // half the f16 spacing above 1
  Tensor x = Tensor::fromFloats(DType::F32, {5},
                                {1 + ulp_half, 1 + 3 * ulp_half, 1 + 1.5f * ulp_half, 65519, 0.1f});
  Tensor y = cast(x, DType::F16);
  EXPECT_EQ(y.getFloat(0), 1.0f);                      // tie -> even
  EXPECT_EQ(y.getFloat(1), 1 + std::ldexp(1.0f, -9));  // tie -> even
  EXPECT_EQ(y.getFloat(2), 1 + std::ldexp(1.0f, -10)); // above the tie
  EXPECT_EQ(y.getFloat(3), kF16Max);                   // below 65520 rounds down
  EXPECT_EQ(y.getFloat(4), 0.0999755859375f);          // 0x2E66
}

TEST(CastKernel, F16OverflowFollowsTheMode) {
  // 65520 is the midpoint to the next (unrepresentable) step: IEEE rounds it to inf.
  Tensor x = Tensor::fromFloats(DType::F32, {4}, {70000, -70000, 65520, kNaN});
  Tensor ieee = cast(x, DType::F16, kInfNan);
  EXPECT_TRUE(std::isinf(ieee.getFloat(0)) && ieee.getFloat(0) > 0);
  EXPECT_TRUE(std::isinf(ieee.getFloat(1)) && ieee.getFloat(1) < 0);
  EXPECT_TRUE(std::isinf(ieee.getFloat(2)));
  EXPECT_TRUE(std::isnan(ieee.getFloat(3)));
  Tensor sat = cast(x, DType::F16, kSat);
  EXPECT_EQ(sat.toFloats(), (std::vector<float>{kF16Max, -kF16Max, kF16Max, 0.0f}));
}

TEST(CastKernel, ToBF16) {
  const float ulp_half = std::ldexp(1.0f, -8);
  Tensor x = Tensor::fromFloats(DType::F32, {3}, {1 + ulp_half, 1 + 3 * ulp_half, 0.1f});
  Tensor y = cast(x, DType::BF16);
  EXPECT_EQ(y.getFloat(0), 1.0f);
  EXPECT_EQ(y.getFloat(1), 1 + std::ldexp(1.0f, -6));
  EXPECT_EQ(y.getFloat(2), 0.10009765625f); // 0x3DCD
  // bf16 holds 1e5; f16 does not.
  Tensor big = Tensor::fromFloats(DType::BF16, {}, {1e5f});
  EXPECT_TRUE(std::isinf(cast(big, DType::F16, kInfNan).getFloat(0)));
  EXPECT_EQ(cast(big, DType::F16, kSat).getFloat(0), kF16Max);
}

TEST(CastKernel, WideningIsExact) {
  const float tiny = std::ldexp(1.0f, -24); // smallest f16 subnormal
  Tensor h = Tensor::fromFloats(DType::F16, {3}, {kF16Max, tiny, -0.333251953125f});
  Tensor f = cast(h, DType::F32);
  EXPECT_EQ(f.toFloats(), (std::vector<float>{kF16Max, tiny, -0.333251953125f}));
  Tensor back = cast(f, DType::F16);
  EXPECT_EQ(back, h);
}

TEST(CastKernel, FloatToIntTruncatesTowardZeroAndSaturates) {
  Tensor x = Tensor::fromFloats(DType::F32, {7}, {2.7f, -2.7f, 0.5f, -0.5f, 1e10f, -1e10f, kNaN});
  Tensor i32 = cast(x, DType::I32);
  const int64_t lo = std::numeric_limits<int32_t>::min(), hi = std::numeric_limits<int32_t>::max();
  std::vector<int64_t> want = {2, -2, 0, 0, hi, lo, 0};
  for (int64_t i = 0; i < 7; ++i)
    EXPECT_EQ(i32.getInt(i), want[i]) << "element " << i;
  Tensor y = Tensor::fromFloats(DType::F32, {3}, {-3.9f, 1e19f, -1e19f});
  Tensor i64 = cast(y, DType::I64);
  EXPECT_EQ(i64.getInt(0), -3);
  EXPECT_EQ(i64.getInt(1), std::numeric_limits<int64_t>::max());
  EXPECT_EQ(i64.getInt(2), std::numeric_limits<int64_t>::min());
  // 2^40 is exact in f32 and in i64.
  Tensor p = Tensor::fromFloats(DType::F32, {}, {std::ldexp(1.0f, 40)});
  EXPECT_EQ(cast(p, DType::I64).getInt(0), int64_t(1) << 40);
}

TEST(CastKernel, IntToFloat) {
  const int64_t two24 = int64_t(1) << 24;
  Tensor i = Tensor::fromInts(DType::I64, {4}, {two24 + 1, two24 + 3, int64_t(1) << 40, -5});
  Tensor f = cast(i, DType::F32);
  EXPECT_EQ(f.getFloat(0), float(two24));     // tie -> even
  EXPECT_EQ(f.getFloat(1), float(two24 + 4)); // tie -> even
  EXPECT_EQ(f.getFloat(2), std::ldexp(1.0f, 40));
  EXPECT_EQ(f.getFloat(3), -5.0f);
  // f16 spacing is 2 in [2048, 4096) and 65504 is its largest value.
  Tensor j = Tensor::fromInts(DType::I32, {3}, {2049, 2051, 70000});
  Tensor h = cast(j, DType::F16, kInfNan);
  EXPECT_EQ(h.getFloat(0), 2048.0f);
  EXPECT_EQ(h.getFloat(1), 2052.0f);
  EXPECT_TRUE(std::isinf(h.getFloat(2)));
  EXPECT_EQ(cast(j, DType::F16, kSat).getFloat(2), kF16Max);
}

TEST(CastKernel, IntToInt) {
  Tensor i = Tensor::fromInts(DType::I64, {3}, {(int64_t(1) << 32) + 5, -1, 123456789});
  Tensor j = cast(i, DType::I32);
  EXPECT_EQ(j.getInt(0), 5); // keeps the low 32 bits
  EXPECT_EQ(j.getInt(1), -1);
  EXPECT_EQ(j.getInt(2), 123456789);
  EXPECT_EQ(cast(j, DType::I64).getInt(1), -1);
}

TEST(CastKernel, Bool) {
  Tensor f = Tensor::fromFloats(DType::F32, {5}, {0.0f, -0.0f, 0.5f, -3, kNaN});
  Tensor b = cast(f, DType::Bool);
  std::vector<int64_t> want = {0, 0, 1, 1, 1};
  for (int64_t i = 0; i < 5; ++i)
    EXPECT_EQ(b.getInt(i), want[i]) << "element " << i;
  Tensor back = cast(b, DType::F16);
  EXPECT_EQ(back.toFloats(), (std::vector<float>{0, 0, 1, 1, 1}));
  Tensor i = Tensor::fromInts(DType::I64, {3}, {0, 7, -1});
  Tensor bi = cast(i, DType::Bool);
  EXPECT_EQ(bi.getInt(0), 0);
  EXPECT_EQ(bi.getInt(1), 1);
  EXPECT_EQ(bi.getInt(2), 1);
  EXPECT_EQ(cast(bi, DType::I32).getInt(2), 1);
}

// ---- Cast: gradient ----

TEST(CastGradient, FiniteDifferences) {
  // Cast is linear: a wide step keeps the 16-bit rounding small against it.
  GradCheckOptions wide;
  wide.eps = 0.25;
  EXPECT_TRUE(checkOpGradient("Cast", {gradInput(TensorType{DType::F32, {2, 3}})},
                              {{"dtype", DType::F32}}));
  for (DType to : {DType::F16, DType::BF16}) {
    EXPECT_TRUE(
        checkOpGradient("Cast", {gradInput(TensorType{DType::F32, {2, 3}})}, {{"dtype", to}}, wide))
        << dtypeName(to);
    EXPECT_TRUE(
        checkOpGradient("Cast", {gradInput(TensorType{to, {4}})}, {{"dtype", DType::F32}}, wide))
        << dtypeName(to);
  }
}

// The gradient of `x`'s Cast to `to` given an output gradient (or none).
Expected<std::vector<ValueId>> castGradient(Graph &g, const TensorType &x_type, DType to,
                                            bool with_grad) {
  ValueId x = g.addInput("x", x_type, InputRole::Data);
  ops::OpBuilder b(g);
  KILN_ASSIGN_OR_RETURN(std::vector<ValueId> y, b.tryCreate("Cast", "cast", {x}, {{"dtype", to}}));
  ValueId dy = with_grad ? g.addInput("dy", g.type(y[0]), InputRole::Data) : kNoValue;
  ops::GradContext ctx{b, g.node(g.value(y[0]).producer), {dy}};
  return ops::OpRegistry::builtin().find("Cast")->impl.grad(ctx);
}

TEST(CastGradient, CastsBackToTheInputType) {
  Graph g;
  TensorType h{DType::F16, {2, 3}};
  auto grads = castGradient(g, h, DType::F32, true);
  ASSERT_TRUE(grads) << grads.message();
  ASSERT_EQ(grads->size(), 1u);
  EXPECT_EQ(g.type((*grads)[0]), h);
  EXPECT_EQ(g.node(g.value((*grads)[0]).producer).op, "Cast");
}

TEST(CastGradient, NoneForIntegerInputsOrOutputs) {
  Graph g1;
  auto from_int = castGradient(g1, TensorType{DType::I64, {2}}, DType::F32, true);
  ASSERT_TRUE(from_int) << from_int.message();
  EXPECT_EQ(*from_int, std::vector<ValueId>{kNoValue});
  Graph g2;
  auto to_int = castGradient(g2, TensorType{DType::F32, {2}}, DType::I32, false);
  ASSERT_TRUE(to_int) << to_int.message();
  EXPECT_EQ(*to_int, std::vector<ValueId>{kNoValue});
}

// ---- Fill ----

TEST(FillInfer, ShapeAndDType) {
  auto t = inferOp("Fill", {}, {{"value", 1.5}, {"dtype", DType::F16}, {"shape", Shape{2, 3}}});
  ASSERT_TRUE(t) << t.message();
  EXPECT_EQ((*t)[0], (TensorType{DType::F16, {2, 3}}));
  auto scalar = inferOp("Fill", {}, {{"value", 2.0}, {"dtype", DType::F32}});
  ASSERT_TRUE(scalar) << scalar.message();
  EXPECT_EQ((*scalar)[0], (TensorType{DType::F32, {}}));
  auto empty = inferOp("Fill", {}, {{"value", 0.0}, {"dtype", DType::I64}, {"shape", Shape{0}}});
  ASSERT_TRUE(empty) << empty.message();
  EXPECT_EQ((*empty)[0], (TensorType{DType::I64, {0}}));
  // An integer literal is accepted for the float attribute.
  EXPECT_TRUE(inferOp("Fill", {}, {{"value", int64_t(3)}, {"dtype", DType::I32}}));
}

TEST(FillInfer, RejectsBadAttributes) {
  auto neg = inferOp("Fill", {}, {{"value", 0.0}, {"dtype", DType::F32}, {"shape", Shape{2, -1}}});
  ASSERT_FALSE(neg);
  EXPECT_NE(neg.message().find("[2,-1]"), std::string::npos) << neg.message();
  EXPECT_NE(neg.message().find(">= 0"), std::string::npos) << neg.message();
  EXPECT_FALSE(inferOp("Fill", {}, {{"dtype", DType::F32}})); // no value
  EXPECT_FALSE(inferOp("Fill", {}, {{"value", 1.0}}));        // no dtype
  EXPECT_FALSE(inferOp("Fill", {{DType::F32, {2}}}, {{"value", 1.0}, {"dtype", DType::F32}}));
  auto frac = inferOp("Fill", {}, {{"value", 0.5}, {"dtype", DType::I64}});
  ASSERT_FALSE(frac);
  EXPECT_NE(frac.message().find("i64"), std::string::npos) << frac.message();
  EXPECT_FALSE(inferOp("Fill", {}, {{"value", 3e9}, {"dtype", DType::I32}}));
  EXPECT_FALSE(inferOp("Fill", {}, {{"value", 9.3e18}, {"dtype", DType::I64}}));
  EXPECT_FALSE(inferOp("Fill", {}, {{"value", 2.0}, {"dtype", DType::Bool}}));
  EXPECT_FALSE(inferOp("Fill", {}, {{"value", double(kNaN)}, {"dtype", DType::I32}}));
}

Tensor fill(double value, DType dtype, Shape shape, OverflowMode mode = kInfNan) {
  return run1("Fill", {}, {{"value", value}, {"dtype", dtype}, {"shape", shape}}, mode);
}

TEST(FillKernel, StoresTheRoundedValue) {
  Tensor f = fill(0.1, DType::F32, {2, 2});
  EXPECT_EQ(f.toFloats(), (std::vector<float>(4, 0.1f)));
  EXPECT_EQ(fill(0.1, DType::F16, {3}).toFloats(), (std::vector<float>(3, 0.0999755859375f)));
  EXPECT_EQ(fill(0.1, DType::BF16, {}).getFloat(0), 0.10009765625f);
  EXPECT_EQ(fill(-65504, DType::F16, {}).getFloat(0), -kF16Max);
}

TEST(FillKernel, OutOfRangeFollowsTheMode) {
  Tensor inf = fill(-1e9, DType::F16, {2}, kInfNan);
  EXPECT_TRUE(std::isinf(inf.getFloat(0)) && inf.getFloat(0) < 0);
  EXPECT_EQ(fill(-1e9, DType::F16, {2}, kSat).getFloat(1), -kF16Max);
}

TEST(FillKernel, Integers) {
  Tensor big = fill(std::ldexp(1.0, 40) + 1, DType::I64, {2});
  EXPECT_EQ(big.getInt(0), (int64_t(1) << 40) + 1);
  EXPECT_EQ(fill(-7, DType::I32, {}).getInt(0), -7);
  EXPECT_EQ(fill(1, DType::Bool, {3}).getInt(2), 1);
  EXPECT_EQ(fill(5, DType::I32, {0, 4}).numElements(), 0);
}

TEST(FillKernel, BuilderConstantUsesFill) {
  Graph g;
  ops::OpBuilder b(g);
  ValueId c = b.constant(2.5, DType::BF16, "c", {2});
  ASSERT_TRUE(b.status()) << b.status().message();
  EXPECT_EQ(g.type(c), (TensorType{DType::BF16, {2}}));
  g.addOutput("c", c);
  auto out = ops::interpret(g, {});
  ASSERT_TRUE(out) << out.message();
  EXPECT_EQ(out->at("c").toFloats(), (std::vector<float>{2.5f, 2.5f}));
}

TEST(FillGradient, IsAGeneratorWithoutGradientRule) {
  EXPECT_FALSE(ops::OpRegistry::builtin().find("Fill")->impl.grad);
}

} // namespace
} // namespace kiln::testing
