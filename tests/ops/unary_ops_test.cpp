// Tests of Neg, Exp, Log, Sqrt, Rsqrt, Sigmoid, Silu, RsqrtGrad and SiluGrad:
// shape inference, kernels against <cmath> in double, 16-bit rounding and
// overflow, and gradient checks.
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>

#include <gtest/gtest.h>

#include "ir/float16.h"
#include "tests/support/gradient_check.h"
#include "tests/support/op_test_util.h"
#include "tests/support/random.h"

namespace kiln::testing {
namespace {

const OverflowMode kInfNan = OverflowMode::InfNan;
const OverflowMode kSat = OverflowMode::Saturation;

double refSigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

struct UnaryCase {
  const char *op;
  std::function<double(double)> ref;
  float lo, hi; // input range where the op is smooth
};

const UnaryCase kUnaryCases[] = {
    {"Neg", [](double x) { return -x; }, -2, 2},
    {"Exp", [](double x) { return std::exp(x); }, -3, 3},
    {"Log", [](double x) { return std::log(x); }, 0.25f, 4},
    {"Sqrt", [](double x) { return std::sqrt(x); }, 0.25f, 4},
    {"Rsqrt", [](double x) { return 1.0 / std::sqrt(x); }, 0.25f, 4},
    {"Sigmoid", refSigmoid, -6, 6},
    {"Silu", [](double x) { return x * refSigmoid(x); }, -6, 6},
};

// ---- shape inference ----

TEST(UnaryOpsInfer, KeepTheInputType) {
  for (const UnaryCase &c : kUnaryCases)
    for (DType d : {DType::F32, DType::F16, DType::BF16})
      for (Shape s : {Shape{}, Shape{3}, Shape{2, 0, 4}}) {
        auto t = inferOp(c.op, {TensorType{d, s}});
        ASSERT_TRUE(t) << c.op << ": " << t.message();
        EXPECT_EQ((*t)[0], (TensorType{d, s})) << c.op;
      }
  auto neg = inferOp("Neg", {TensorType{DType::I64, {2}}});
  ASSERT_TRUE(neg) << neg.message();
  EXPECT_EQ((*neg)[0], (TensorType{DType::I64, {2}}));
}

TEST(UnaryOpsInfer, RejectIntegersAndWrongArity) {
  for (const char *op : {"Exp", "Log", "Sqrt", "Rsqrt", "Sigmoid", "Silu"}) {
    auto t = inferOp(op, {TensorType{DType::I32, {2}}});
    ASSERT_FALSE(t) << op;
    EXPECT_NE(t.message().find("i32"), std::string::npos) << t.message();
  }
  EXPECT_FALSE(inferOp("Neg", {TensorType{DType::Bool, {2}}}));
  EXPECT_FALSE(inferOp("Exp", {}));
  EXPECT_FALSE(inferOp("Exp", {f32({2}), f32({2})}));
}

TEST(FusedBackwardInfer, BothInputsOfOneType) {
  for (const char *op : {"RsqrtGrad", "SiluGrad"}) {
    auto ok = inferOp(op, {f32({2, 3}), f32({2, 3})});
    ASSERT_TRUE(ok) << ok.message();
    EXPECT_EQ((*ok)[0], f32({2, 3}));
    auto shape = inferOp(op, {f32({2, 3}), f32({3})});
    ASSERT_FALSE(shape) << op;
    EXPECT_NE(shape.message().find("f32[3]"), std::string::npos) << shape.message();
    EXPECT_FALSE(inferOp(op, {f32({2}), TensorType{DType::F16, {2}}})) << op;
  }
}

// ---- kernels ----

TEST(UnaryOpsKernel, MatchCmathInDouble) {
  for (const UnaryCase &c : kUnaryCases) {
    Tensor x = randomTensor(f32({4, 5}), 7, c.lo, c.hi);
    Tensor y = run1(c.op, {x});
    ASSERT_EQ(y.type(), x.type()) << c.op;
    for (int64_t i = 0; i < x.numElements(); ++i) {
      double want = c.ref(x.getFloat(i));
      EXPECT_NEAR(y.getFloat(i), want, 1e-6 * std::max(1.0, std::abs(want)))
          << c.op << "(" << x.getFloat(i) << ")";
    }
  }
}

TEST(UnaryOpsKernel, SixteenBitResultsAreTheRoundedExactValue) {
  // Rounding the double result once to the storage type is the reference.
  for (const UnaryCase &c : kUnaryCases)
    for (DType d : {DType::F16, DType::BF16}) {
      Tensor x = randomTensor(TensorType{d, {16}}, 9, c.lo, c.hi);
      Tensor y = run1(c.op, {x});
      ASSERT_EQ(y.dtype(), d);
      for (int64_t i = 0; i < 16; ++i) {
        float want = roundToDType(static_cast<float>(c.ref(x.getFloat(i))), d, kInfNan);
        EXPECT_EQ(y.getFloat(i), want)
            << c.op << " " << dtypeName(d) << "(" << x.getFloat(i) << ")";
      }
    }
}

TEST(UnaryOpsKernel, SqrtOfTwoInSixteenBits) {
  // sqrt(2) = 1.0110101000001...b: both f16 (10 fraction bits) and bf16 (7)
  // round down to 1.0110101b = 1.4140625.
  for (DType d : {DType::F16, DType::BF16})
    EXPECT_EQ(run1("Sqrt", {Tensor::fromFloats(d, {}, {2.0f})}).getFloat(0), 1.4140625f);
}

TEST(UnaryOpsKernel, ExpF16OverflowFollowsTheMode) {
  // e^12 = 162755 does not fit f16; e^11 = 59874 does.
  Tensor x = Tensor::fromFloats(DType::F16, {3}, {12, 11, -20});
  Tensor inf = run1("Exp", {x}, {}, kInfNan);
  EXPECT_TRUE(std::isinf(inf.getFloat(0)));
  EXPECT_EQ(inf.getFloat(1), roundToDType(static_cast<float>(std::exp(11.0)), DType::F16, kInfNan));
  EXPECT_GT(inf.getFloat(1), 59000.0f);
  EXPECT_EQ(inf.getFloat(2), 0.0f); // e^-20 is below the smallest f16 subnormal
  Tensor sat = run1("Exp", {x}, {}, kSat);
  EXPECT_EQ(sat.getFloat(0), kF16Max);
  EXPECT_EQ(sat.getFloat(1), inf.getFloat(1));
}

TEST(UnaryOpsKernel, ExpF32Overflow) {
  Tensor x = Tensor::fromFloats(DType::F32, {}, {100});
  EXPECT_TRUE(std::isinf(run1("Exp", {x}, {}, kInfNan).getFloat(0)));
  EXPECT_EQ(run1("Exp", {x}, {}, kSat).getFloat(0), std::numeric_limits<float>::max());
}

TEST(UnaryOpsKernel, DomainEdges) {
  Tensor x = Tensor::fromFloats(DType::F16, {2}, {0, -1});
  Tensor log = run1("Log", {x}, {}, kInfNan);
  EXPECT_TRUE(std::isinf(log.getFloat(0)) && log.getFloat(0) < 0);
  EXPECT_TRUE(std::isnan(log.getFloat(1)));
  Tensor log_sat = run1("Log", {x}, {}, kSat);
  EXPECT_EQ(log_sat.getFloat(0), -kF16Max);
  EXPECT_EQ(log_sat.getFloat(1), 0.0f); // NaN saturates to 0
  EXPECT_TRUE(std::isnan(run1("Sqrt", {x}).getFloat(1)));
  Tensor rsqrt = run1("Rsqrt", {x}, {}, kInfNan);
  EXPECT_TRUE(std::isinf(rsqrt.getFloat(0)) && rsqrt.getFloat(0) > 0);
  EXPECT_EQ(run1("Rsqrt", {x}, {}, kSat).getFloat(0), kF16Max);
}

TEST(UnaryOpsKernel, SigmoidAndSiluStayFiniteForLargeInputs) {
  Tensor x = Tensor::fromFloats(DType::F32, {4}, {-1000, -100, 100, 1000});
  Tensor s = run1("Sigmoid", {x});
  EXPECT_EQ(s.getFloat(0), 0.0f);
  EXPECT_NEAR(s.getFloat(1), 0.0f, 1e-40);
  EXPECT_EQ(s.getFloat(2), 1.0f);
  EXPECT_EQ(s.getFloat(3), 1.0f);
  Tensor silu = run1("Silu", {x});
  EXPECT_EQ(silu.getFloat(0), 0.0f);
  EXPECT_EQ(silu.getFloat(3), 1000.0f);
  for (float v : silu.toFloats())
    EXPECT_FALSE(std::isnan(v));
}

TEST(UnaryOpsKernel, NegOnIntegersAndF16) {
  Tensor i = Tensor::fromInts(DType::I64, {3}, {5, -7, std::numeric_limits<int64_t>::min()});
  Tensor ni = run1("Neg", {i});
  EXPECT_EQ(ni.getInt(0), -5);
  EXPECT_EQ(ni.getInt(1), 7);
  EXPECT_EQ(ni.getInt(2), std::numeric_limits<int64_t>::min()); // wraps around
  Tensor j = Tensor::fromInts(DType::I32, {1}, {std::numeric_limits<int32_t>::max()});
  EXPECT_EQ(run1("Neg", {j}).getInt(0), -std::numeric_limits<int32_t>::max());
  Tensor h = Tensor::fromFloats(DType::F16, {2}, {kF16Max, 0.5f});
  EXPECT_EQ(run1("Neg", {h}).toFloats(), (std::vector<float>{-kF16Max, -0.5f}));
}

TEST(FusedBackwardKernel, RsqrtGradIsTheDerivativeOfRsqrt) {
  // d/dx x^-1/2 = -0.5 x^-3/2 = -0.5 y^3 with y = x^-1/2.
  Tensor x = randomTensor(f32({12}), 3, 0.25f, 4.0f);
  Tensor dy = randomTensor(f32({12}), 4);
  Tensor y = run1("Rsqrt", {x});
  Tensor dx = run1("RsqrtGrad", {y, dy});
  for (int64_t i = 0; i < 12; ++i) {
    double want = -0.5 * dy.getFloat(i) * std::pow(double(x.getFloat(i)), -1.5);
    EXPECT_NEAR(dx.getFloat(i), want, 1e-5 * std::max(1.0, std::abs(want)));
  }
}

TEST(FusedBackwardKernel, SiluGradIsTheDerivativeOfSilu) {
  Tensor x = randomTensor(f32({12}), 5, -6.0f, 6.0f);
  Tensor dy = randomTensor(f32({12}), 6);
  Tensor dx = run1("SiluGrad", {dy, x});
  auto silu = [](double v) { return v * refSigmoid(v); };
  for (int64_t i = 0; i < 12; ++i) {
    const double v = x.getFloat(i), h = 1e-5;
    double want = dy.getFloat(i) * (silu(v + h) - silu(v - h)) / (2 * h);
    EXPECT_NEAR(dx.getFloat(i), want, 1e-5);
  }
}

TEST(FusedBackwardKernel, F16OverflowFollowsTheMode) {
  // -0.5 * 200 * 10^3 = -1e5 overflows f16.
  Tensor y = Tensor::fromFloats(DType::F16, {}, {10});
  Tensor dy = Tensor::fromFloats(DType::F16, {}, {200});
  EXPECT_TRUE(std::isinf(run1("RsqrtGrad", {y, dy}, {}, kInfNan).getFloat(0)));
  EXPECT_EQ(run1("RsqrtGrad", {y, dy}, {}, kSat).getFloat(0), -kF16Max);
}

// ---- gradients ----

TEST(UnaryOpsGradient, FiniteDifferences) {
  for (const UnaryCase &c : kUnaryCases)
    for (Shape s : {Shape{}, Shape{5}, Shape{2, 3}})
      EXPECT_TRUE(checkOpGradient(c.op, {gradInput(f32(s), c.lo, c.hi)}))
          << c.op << shapeToString(s);
}

TEST(UnaryOpsGradient, GradientsKeepSixteenBitTypes) {
  for (const UnaryCase &c : kUnaryCases) {
    Graph g;
    TensorType h{DType::BF16, {2, 3}};
    ValueId x = g.addInput("x", h, InputRole::Data);
    ops::OpBuilder b(g);
    auto y = b.tryCreate(c.op, "op", {x});
    ASSERT_TRUE(y) << y.message();
    ValueId dy = g.addInput("dy", h, InputRole::Data);
    const Node node = g.node(g.value((*y)[0]).producer);
    ops::GradContext ctx{b, node, {dy}};
    auto grads = ops::OpRegistry::builtin().find(c.op)->impl.grad(ctx);
    ASSERT_TRUE(grads) << grads.message();
    ASSERT_TRUE(b.status()) << b.status().message();
    EXPECT_EQ(g.type((*grads)[0]), h) << c.op;
  }
}

TEST(UnaryOpsGradient, NoGradientForIntegersOrMissingOutputGradient) {
  Graph g;
  ValueId x = g.addInput("x", TensorType{DType::I64, {2}}, InputRole::Data);
  ops::OpBuilder b(g);
  auto y = b.tryCreate("Neg", "neg", {x});
  ASSERT_TRUE(y) << y.message();
  ValueId dy = g.addInput("dy", TensorType{DType::I64, {2}}, InputRole::Data);
  ops::GradContext ctx{b, g.node(g.value((*y)[0]).producer), {dy}};
  auto grads = ops::OpRegistry::builtin().find("Neg")->impl.grad(ctx);
  ASSERT_TRUE(grads) << grads.message();
  EXPECT_EQ(*grads, std::vector<ValueId>{kNoValue});

  ValueId f = g.addInput("f", f32({2}), InputRole::Data);
  for (const UnaryCase &c : kUnaryCases) {
    auto out = b.tryCreate(c.op, "op", {f});
    ASSERT_TRUE(out) << out.message();
    ops::GradContext none{b, g.node(g.value((*out)[0]).producer), {kNoValue}};
    auto no_grads = ops::OpRegistry::builtin().find(c.op)->impl.grad(none);
    ASSERT_TRUE(no_grads) << no_grads.message();
    EXPECT_EQ(*no_grads, std::vector<ValueId>{kNoValue}) << c.op;
  }
}

TEST(FusedBackwardGradient, HaveNoGradientRule) {
  for (const char *op : {"RsqrtGrad", "SiluGrad"})
    EXPECT_FALSE(ops::OpRegistry::builtin().find(op)->impl.grad) << op;
}

} // namespace
} // namespace kiln::testing
