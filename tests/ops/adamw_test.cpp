// AdamW: shape and attribute checks, a hand-computed two-step update, a naive
// per-element reference over several steps and dtypes, rounding and overflow.
#include <cmath>
#include <limits>

#include <gtest/gtest.h>

#include "ir/float16.h"
#include "tests/support/op_test_util.h"
#include "tests/support/random.h"

namespace kiln::testing {
namespace {

std::vector<TensorType> adamTypes(DType param, DType grad, Shape shape) {
  return {{param, shape},      {grad, shape},    {DType::F32, shape},
          {DType::F32, shape}, {DType::F32, {}}, {DType::I64, {}}};
}

AttrMap adamAttrs(double b1, double b2, double eps, double wd) {
  return {{"beta1", b1}, {"beta2", b2}, {"eps", eps}, {"weight_decay", wd}};
}

TEST(AdamWInfer, OutputsParamAndF32State) {
  auto t = inferOp("AdamW", adamTypes(DType::BF16, DType::F32, {3, 4}));
  ASSERT_TRUE(t) << t.message();
  ASSERT_EQ(t->size(), 3u);
  EXPECT_EQ((*t)[0], (TensorType{DType::BF16, {3, 4}}));
  EXPECT_EQ((*t)[1], (TensorType{DType::F32, {3, 4}}));
  EXPECT_EQ((*t)[2], (TensorType{DType::F32, {3, 4}}));
}

TEST(AdamWInfer, RejectsBadInputs) {
  auto types = adamTypes(DType::F32, DType::F32, {3, 4});
  auto with = [&](size_t i, TensorType t) {
    auto copy = types;
    copy[i] = t;
    return inferOp("AdamW", copy);
  };
  EXPECT_TRUE(mentions(with(1, {DType::F32, {4, 3}}).message(), {"grad", "[3,4]", "f32[4,3]"}));
  EXPECT_TRUE(mentions(with(2, {DType::F32, {3}}).message(), {"m", "[3,4]"}));
  EXPECT_TRUE(mentions(with(3, {DType::F32, {3, 4, 1}}).message(), {"v", "[3,4]"}));
  EXPECT_TRUE(mentions(with(4, {DType::F32, {1}}).message(), {"lr", "scalar"}));
  EXPECT_TRUE(mentions(with(5, {DType::I64, {1}}).message(), {"step", "scalar"}));
  EXPECT_FALSE(with(2, {DType::F16, {3, 4}}));
  EXPECT_FALSE(with(5, {DType::I32, {}}));
  EXPECT_TRUE(mentions(inferOp("AdamW", types, {{"beta1", 1.0}}).message(), {"beta1", "[0, 1)"}));
  EXPECT_TRUE(mentions(inferOp("AdamW", types, {{"beta2", -0.1}}).message(), {"beta2"}));
  EXPECT_TRUE(mentions(inferOp("AdamW", types, {{"eps", -1e-8}}).message(), {"eps"}));
  EXPECT_TRUE(
      mentions(inferOp("AdamW", types, {{"weight_decay", -0.1}}).message(), {"weight_decay"}));
}

std::vector<Tensor> adamInputs(Tensor p, Tensor g, Tensor m, Tensor v, double lr, int64_t step) {
  return {std::move(p),
          std::move(g),
          std::move(m),
          std::move(v),
          Tensor::scalar(DType::F32, lr),
          Tensor::fromInts(DType::I64, {}, {step})};
}

// p = 1, lr = 0.1, betas (0.9, 0.999), eps 1e-8, weight decay 0.01; gradients 0.5 then -0.25.
TEST(AdamWKernel, HandComputedTwoSteps) {
  auto f32 = [](float x) { return Tensor::fromFloats(DType::F32, {1}, {x}); };
  const AttrMap attrs = adamAttrs(0.9, 0.999, 1e-8, 0.01);
  auto s1 = runOp("AdamW", adamInputs(f32(1), f32(0.5f), f32(0), f32(0), 0.1, 1), attrs);
  ASSERT_TRUE(s1) << s1.message();
  // Decay first: 1 - 0.1*0.01*1 = 0.999. m = 0.1*0.5 = 0.05, v = 0.001*0.25 = 0.00025;
  // corrected 0.05/0.1 = 0.5 and 0.00025/0.001 = 0.25, sqrt 0.5.
  const double p1 = 0.999 - 0.1 * 0.5 / (0.5 + 1e-8);
  EXPECT_NEAR((*s1)[0].getFloat(0), p1, 1e-7);
  EXPECT_NEAR((*s1)[1].getFloat(0), 0.05, 0.05 * 1e-7);
  EXPECT_NEAR((*s1)[2].getFloat(0), 0.00025, 0.00025 * 1e-7);

  auto s2 = runOp("AdamW", adamInputs((*s1)[0], f32(-0.25f), (*s1)[1], (*s1)[2], 0.1, 2), attrs);
  ASSERT_TRUE(s2) << s2.message();
  // m = 0.9*0.05 - 0.1*0.25 = 0.02; v = 0.999*0.00025 + 0.001*0.0625 = 0.00031225;
  // bias corrections 1 - 0.81 = 0.19 and 1 - 0.998001 = 0.001999.
  const double update = 0.1 * (0.02 / 0.19) / (std::sqrt(0.00031225 / 0.001999) + 1e-8);
  const double p2 = p1 * (1 - 0.001) - update;
  EXPECT_NEAR((*s2)[0].getFloat(0), p2, 1e-7);
  EXPECT_NEAR((*s2)[1].getFloat(0), 0.02, 0.02 * 1e-7);
  EXPECT_NEAR((*s2)[2].getFloat(0), 0.00031225, 0.00031225 * 1e-7);
  // Decaying after the update instead would land update * 0.001 (about 3e-5) away.
  EXPECT_GT(std::abs((*s2)[0].getFloat(0) - (p1 - update) * (1 - 0.001)), 1e-5);
}

// Naive PyTorch AdamW (torch.optim.AdamW, single tensor) on doubles.
struct RefAdam {
  std::vector<double> p, m, v;

  static RefAdam from(const Tensor &p, const Tensor &m, const Tensor &v) {
    RefAdam r;
    for (int64_t i = 0; i < p.numElements(); ++i) {
      r.p.push_back(p.getFloat(i));
      r.m.push_back(m.getFloat(i));
      r.v.push_back(v.getFloat(i));
    }
    return r;
  }

  void step(const Tensor &g, double lr, int64_t t, double b1, double b2, double eps, double wd) {
    for (size_t i = 0; i < p.size(); ++i) {
      const double gi = g.getFloat(static_cast<int64_t>(i));
      p[i] *= 1 - lr * wd;
      m[i] = m[i] + (1 - b1) * (gi - m[i]);
      v[i] = v[i] * b2 + (1 - b2) * gi * gi;
      const double step_size = lr / (1 - std::pow(b1, t));
      const double denom = std::sqrt(v[i]) / std::sqrt(1 - std::pow(b2, t)) + eps;
      p[i] -= step_size * m[i] / denom;
    }
  }
};

// Each step starts from the previous step's stored (f32) state, so only the
// final rounding of each output separates kernel and reference.
TEST(AdamWKernel, MatchesNaiveReferenceEachStep) {
  const Shape shape{3, 5};
  const double b1 = 0.9, b2 = 0.95, eps = 1e-6, wd = 0.1, lr = 0.01;
  for (DType gdt : {DType::F32, DType::BF16, DType::F16}) {
    Tensor p = randomTensor({DType::F32, shape}, 1);
    Tensor m(TensorType{DType::F32, shape}), v(TensorType{DType::F32, shape});
    for (int64_t t = 1; t <= 4; ++t) {
      Tensor g = randomTensor({gdt, shape}, 100 + t);
      RefAdam ref = RefAdam::from(p, m, v);
      ref.step(g, lr, t, b1, b2, eps, wd);
      auto r = runOp("AdamW", adamInputs(p, g, m, v, lr, t), adamAttrs(b1, b2, eps, wd));
      ASSERT_TRUE(r) << r.message();
      p = (*r)[0], m = (*r)[1], v = (*r)[2];
      for (int64_t i = 0; i < 15; ++i) {
        EXPECT_NEAR(p.getFloat(i), ref.p[i], 1e-7 * std::abs(ref.p[i]) + 1e-12)
            << dtypeName(gdt) << " step " << t;
        EXPECT_NEAR(m.getFloat(i), ref.m[i], 1e-7 * std::abs(ref.m[i]) + 1e-15);
        EXPECT_NEAR(v.getFloat(i), ref.v[i], 1e-7 * std::abs(ref.v[i]) + 1e-15);
      }
    }
  }
}

// A 16-bit param is updated in wide arithmetic and rounded once to nearest.
TEST(AdamWKernel, SixteenBitParamRoundsOnce) {
  const Shape shape{8};
  for (DType pdt : {DType::F16, DType::BF16}) {
    Tensor p = randomTensor({pdt, shape}, 5, 0.55f, 0.95f);
    Tensor g = randomTensor({DType::F32, shape}, 6);
    Tensor zero(TensorType{DType::F32, shape});
    auto r = runOp("AdamW", adamInputs(p, g, zero, zero, 1e-3, 1), adamAttrs(0.9, 0.95, 1e-6, 0));
    ASSERT_TRUE(r) << r.message();
    ASSERT_EQ((*r)[0].dtype(), pdt);
    RefAdam ref = RefAdam::from(p, zero, zero);
    ref.step(g, 1e-3, 1, 0.9, 0.95, 1e-6, 0);
    // Half an ulp of the storage type in [0.5, 1), where the results stay.
    const double half_ulp = pdt == DType::F16 ? std::ldexp(1.0, -12) : std::ldexp(1.0, -9);
    for (int64_t i = 0; i < 8; ++i)
      EXPECT_LE(std::abs((*r)[0].getFloat(i) - ref.p[i]), half_ulp * (1 + 1e-6))
          << dtypeName(pdt) << " " << i;
  }
}

TEST(AdamWKernel, F16OverflowFollowsTheMode) {
  // -65504 minus a step of 20 is past the f16 range.
  Tensor p = Tensor::fromFloats(DType::F16, {1}, {-65504});
  Tensor g = Tensor::fromFloats(DType::F32, {1}, {1});
  Tensor zero(TensorType{DType::F32, {1}});
  const AttrMap attrs = adamAttrs(0.9, 0.95, 0, 0);
  auto inf = runOp("AdamW", adamInputs(p, g, zero, zero, 20, 1), attrs, OverflowMode::InfNan);
  ASSERT_TRUE(inf) << inf.message();
  EXPECT_EQ((*inf)[0].getFloat(0), -std::numeric_limits<float>::infinity());
  auto sat = runOp("AdamW", adamInputs(p, g, zero, zero, 20, 1), attrs, OverflowMode::Saturation);
  ASSERT_TRUE(sat) << sat.message();
  EXPECT_EQ((*sat)[0].getFloat(0), -kF16Max);
}

TEST(AdamWKernel, StepBelowOneIsAnError) {
  Tensor x(TensorType{DType::F32, {2}});
  for (int64_t t : {0, -3}) {
    auto r = runOp("AdamW", adamInputs(x, x, x, x, 0.1, t));
    ASSERT_FALSE(r);
    EXPECT_TRUE(mentions(r.message(), {"'op'", "step " + std::to_string(t), "1"}));
  }
}

TEST(AdamW, HasNoGradientRule) {
  EXPECT_FALSE(static_cast<bool>(ops::OpRegistry::builtin().find("AdamW")->impl.grad));
}

} // namespace
} // namespace kiln::testing
