// MatMul and BatchMatMul: shape inference, kernels against naive double loops,
// 16-bit rounding and overflow, and fp32_out (gradients: matmul_grad_test.cpp).
#include <cmath>
#include <limits>

#include <gtest/gtest.h>

#include "ir/float16.h"
#include "tests/ops/matmul_test_util.h"
#include "tests/support/op_test_util.h"
#include "tests/support/random.h"

namespace kiln::testing {
namespace {

// Element (r, c) of the logical matrix `b` of operand `t` (stored transposed when `tr`).
double logical(const Tensor &t, int64_t b, int64_t r, int64_t c, bool tr) {
  const Shape &s = t.shape();
  const int64_t rows = s[s.size() - 2], cols = s[s.size() - 1];
  return tr ? t.getFloat(b * rows * cols + c * cols + r)
            : t.getFloat(b * rows * cols + r * cols + c);
}

// Naive C = op(A) op(B) (+ bias) in double, batched over all but the last two axes.
std::vector<double> naiveMatMul(const Tensor &a, const Tensor &b, Flags f, int64_t m, int64_t k,
                                int64_t n, const Tensor *bias = nullptr) {
  const int64_t batches = a.numElements() / (m * k);
  std::vector<double> c;
  for (int64_t bt = 0; bt < batches; ++bt)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double acc = 0;
        for (int64_t p = 0; p < k; ++p)
          acc += logical(a, bt, i, p, f.ta) * logical(b, bt, p, j, f.tb);
        c.push_back(acc + (bias ? bias->getFloat(j) : 0.0));
      }
  return c;
}

// --- shape inference ---------------------------------------------------------

TEST(MatMulInfer, AllFlagCombinations) {
  for (Flags f : kAllFlags) {
    auto t = inferOp("MatMul",
                     {{DType::F16, stored({}, 2, 3, f.ta)}, {DType::F16, stored({}, 3, 5, f.tb)}},
                     flagAttrs(f));
    ASSERT_TRUE(t) << t.message();
    EXPECT_EQ((*t)[0], (TensorType{DType::F16, {2, 5}})) << f.ta << f.tb;
  }
}

TEST(MatMulInfer, BiasOfAnyFloatDType) {
  auto t = inferOp("MatMul", {{DType::BF16, {2, 3}}, {DType::BF16, {3, 4}}, {DType::F32, {4}}});
  ASSERT_TRUE(t) << t.message();
  EXPECT_EQ((*t)[0], (TensorType{DType::BF16, {2, 4}}));
}

TEST(MatMulInfer, ContractionMismatchNamesShapesAndFlags) {
  auto t = inferOp("MatMul", {{DType::F32, {2, 3}}, {DType::F32, {4, 3}}});
  ASSERT_FALSE(t);
  EXPECT_TRUE(
      mentions(t.message(), {"f32[2,3]", "f32[4,3]", "transpose_a=false", "transpose_b=false"}));
  // The same shapes contract once b is transposed.
  EXPECT_TRUE(
      inferOp("MatMul", {{DType::F32, {2, 3}}, {DType::F32, {4, 3}}}, {{"transpose_b", true}}));
}

TEST(MatMulInfer, RejectsBadOperands) {
  EXPECT_TRUE(mentions(inferOp("MatMul", {{DType::F32, {2, 2, 3}}, {DType::F32, {3, 4}}}).message(),
                       {"2-D", "f32[2,2,3]"}));
  EXPECT_TRUE(mentions(inferOp("MatMul", {{DType::F32, {2, 3}}, {DType::F16, {3, 4}}}).message(),
                       {"one dtype"}));
  EXPECT_TRUE(mentions(
      inferOp("MatMul", {{DType::F32, {2, 3}}, {DType::F32, {3, 4}}, {DType::F32, {3}}}).message(),
      {"bias", "f32[3]", "4"}));
  EXPECT_TRUE(
      mentions(inferOp("MatMul", {{DType::F32, {2, 3}}, {DType::F32, {3, 4}}, {DType::F32, {1, 4}}})
                   .message(),
               {"bias", "1-D"}));
  EXPECT_FALSE(inferOp("MatMul", {{DType::I32, {2, 3}}, {DType::I32, {3, 4}}}));
  EXPECT_FALSE(inferOp("MatMul", {{DType::F32, {2, 3}}}));
}

TEST(BatchMatMulInfer, BatchesOverLeadingAxes) {
  for (Flags f : kAllFlags) {
    auto t = inferOp(
        "BatchMatMul",
        {{DType::F32, stored({2, 3}, 4, 5, f.ta)}, {DType::F32, stored({2, 3}, 5, 6, f.tb)}},
        flagAttrs(f));
    ASSERT_TRUE(t) << t.message();
    EXPECT_EQ((*t)[0], (TensorType{DType::F32, {2, 3, 4, 6}}));
  }
}

TEST(BatchMatMulInfer, RejectsBadOperands) {
  EXPECT_TRUE(mentions(
      inferOp("BatchMatMul", {{DType::F32, {2, 3}}, {DType::F32, {3, 4}}}).message(), {"rank 3"}));
  EXPECT_TRUE(
      mentions(inferOp("BatchMatMul", {{DType::F32, {2, 4, 3}}, {DType::F32, {3, 3, 5}}}).message(),
               {"batch", "[2]", "[3]"}));
  EXPECT_TRUE(mentions(
      inferOp("BatchMatMul", {{DType::F32, {2, 2, 4, 3}}, {DType::F32, {2, 3, 5}}}).message(),
      {"one rank"}));
  EXPECT_TRUE(
      mentions(inferOp("BatchMatMul", {{DType::F32, {2, 4, 3}}, {DType::F32, {2, 4, 5}}}).message(),
               {"f32[2,4,3]", "f32[2,4,5]", "transpose_a=false"}));
}

TEST(MatMulInfer, Fp32OutStoresF32) {
  for (const char *op : {"MatMul", "BatchMatMul"})
    for (DType dt : {DType::F16, DType::BF16, DType::F32}) {
      const Shape batch = std::string(op) == "BatchMatMul" ? Shape{2} : Shape{};
      const std::vector<TensorType> in = {{dt, stored(batch, 2, 3, false)},
                                          {dt, stored(batch, 3, 4, false)}};
      Shape out = batch;
      out.insert(out.end(), {2, 4});
      auto wide = inferOp(op, in, fp32OutAttrs());
      ASSERT_TRUE(wide) << wide.message();
      EXPECT_EQ((*wide)[0], (TensorType{DType::F32, out})) << op << " " << dtypeName(dt);
      auto narrow = inferOp(op, in, {{"fp32_out", false}});
      ASSERT_TRUE(narrow) << narrow.message();
      EXPECT_EQ((*narrow)[0], (TensorType{dt, out})) << op << " " << dtypeName(dt);
      // The default is off.
      EXPECT_EQ((*inferOp(op, in))[0], (*narrow)[0]);
    }
}

// With fp32_out the bias may have the inputs' dtype or f32.
TEST(MatMulInfer, Fp32OutBiasOfInputsDTypeOrF32) {
  for (DType dt : {DType::F16, DType::BF16})
    for (DType bias : {dt, DType::F32}) {
      auto t = inferOp("MatMul", {{dt, {2, 3}}, {dt, {3, 4}}, {bias, {4}}}, fp32OutAttrs());
      ASSERT_TRUE(t) << t.message();
      EXPECT_EQ((*t)[0], (TensorType{DType::F32, {2, 4}}));
    }
  EXPECT_TRUE(
      mentions(inferOp("MatMul", {{DType::F16, {2, 3}}, {DType::F16, {3, 4}}, {DType::F32, {3}}},
                       fp32OutAttrs())
                   .message(),
               {"bias", "f32[3]", "4"}));
}

// --- kernels -----------------------------------------------------------------

void expectMatches(const Tensor &c, const std::vector<double> &expected) {
  ASSERT_EQ(c.numElements(), static_cast<int64_t>(expected.size()));
  for (int64_t i = 0; i < c.numElements(); ++i)
    EXPECT_NEAR(c.getFloat(i), expected[i], 1e-5 * (1 + std::abs(expected[i]))) << "element " << i;
}

TEST(MatMulKernel, AllFlagCombinationsWithAndWithoutBias) {
  const int64_t m = 3, k = 5, n = 4;
  for (Flags f : kAllFlags) {
    Tensor a = randomTensor({DType::F32, stored({}, m, k, f.ta)}, 1);
    Tensor b = randomTensor({DType::F32, stored({}, k, n, f.tb)}, 2);
    Tensor bias = randomTensor({DType::F32, {n}}, 3);
    auto plain = runOp("MatMul", {a, b}, flagAttrs(f));
    ASSERT_TRUE(plain) << plain.message();
    expectMatches((*plain)[0], naiveMatMul(a, b, f, m, k, n));
    auto biased = runOp("MatMul", {a, b, bias}, flagAttrs(f));
    ASSERT_TRUE(biased) << biased.message();
    expectMatches((*biased)[0], naiveMatMul(a, b, f, m, k, n, &bias));
  }
}

// The exact sum is rounded once to f16 (round to nearest even), not per step.
TEST(MatMulKernel, F16RoundsEachOutputOnce) {
  const float u = std::ldexp(1.0f, -11); // half an f16 ulp at 1
  Tensor ones = Tensor::fromFloats(DType::F16, {1, 3}, {1, 1, 1});
  // 1 + u + u = 1 + 2^-10 exactly; adding in f16 would tie back to 1 at each step.
  auto c = runOp("MatMul", {ones, Tensor::fromFloats(DType::F16, {3, 1}, {1, u, u})});
  ASSERT_TRUE(c) << c.message();
  EXPECT_EQ((*c)[0].getFloat(0), 1.0f + 2 * u);
  // 1 + u is a tie between 1 and 1 + 2^-10: even is 1.
  c = runOp("MatMul", {ones, Tensor::fromFloats(DType::F16, {3, 1}, {1, u, 0})});
  ASSERT_TRUE(c);
  EXPECT_EQ((*c)[0].getFloat(0), 1.0f);
  // 1 + 3u is a tie between 1 + 2^-10 and 1 + 2^-9: even is 1 + 2^-9.
  c = runOp("MatMul", {ones, Tensor::fromFloats(DType::F16, {3, 1}, {1, u, 2 * u})});
  ASSERT_TRUE(c);
  EXPECT_EQ((*c)[0].getFloat(0), 1.0f + 4 * u);
}

// The bias joins the wide sum before rounding: 1 + 2^-30 - 1 keeps its 2^-30,
// which rounding the product to f32 first would lose.
TEST(MatMulKernel, BiasIsAddedBeforeRounding) {
  const float tiny = std::ldexp(1.0f, -30);
  auto c = runOp("MatMul", {Tensor::fromFloats(DType::F32, {1, 2}, {1, 1}),
                            Tensor::fromFloats(DType::F32, {2, 1}, {1, tiny}),
                            Tensor::fromFloats(DType::F16, {1}, {-1})});
  ASSERT_TRUE(c) << c.message();
  EXPECT_EQ((*c)[0].getFloat(0), tiny);
}

TEST(MatMulKernel, SixteenBitOutputsMatchRoundedNaiveResult) {
  const int64_t m = 4, k = 7, n = 3;
  for (DType dt : {DType::F16, DType::BF16})
    for (Flags f : kAllFlags) {
      Tensor a = randomTensor({dt, stored({}, m, k, f.ta)}, 11);
      Tensor b = randomTensor({dt, stored({}, k, n, f.tb)}, 12, -4.0f, 4.0f);
      Tensor bias = randomTensor({DType::F32, {n}}, 13);
      auto c = runOp("MatMul", {a, b, bias}, flagAttrs(f));
      ASSERT_TRUE(c) << c.message();
      ASSERT_EQ((*c)[0].dtype(), dt);
      std::vector<double> ref = naiveMatMul(a, b, f, m, k, n, &bias);
      for (int64_t i = 0; i < m * n; ++i) {
        Tensor want = Tensor::scalar(dt, static_cast<float>(ref[i]));
        EXPECT_EQ((*c)[0].getFloat(i), want.getFloat(0)) << dtypeName(dt) << " element " << i;
      }
    }
}

TEST(MatMulKernel, F16OverflowFollowsTheMode) {
  Tensor a = Tensor::fromFloats(DType::F16, {2, 1}, {256, -256});
  Tensor b = Tensor::fromFloats(DType::F16, {1, 1}, {254});
  // 256 * 254 = 65024 fits; the bias is added before rounding and pushes it past 65504.
  Tensor bias = Tensor::fromFloats(DType::F32, {1}, {1024});
  auto fits = runOp("MatMul", {a, b});
  ASSERT_TRUE(fits);
  EXPECT_EQ((*fits)[0].getFloat(0), 65024.0f);
  auto inf = runOp("MatMul", {a, b, bias}, {}, OverflowMode::InfNan);
  ASSERT_TRUE(inf);
  EXPECT_EQ((*inf)[0].getFloat(0), std::numeric_limits<float>::infinity());
  EXPECT_EQ((*inf)[0].getFloat(1), -64000.0f);
  Tensor big = Tensor::fromFloats(DType::F16, {1, 1}, {300});
  auto sat = runOp("MatMul", {Tensor::fromFloats(DType::F16, {2, 1}, {300, -300}), big}, {},
                   OverflowMode::Saturation);
  ASSERT_TRUE(sat);
  EXPECT_EQ((*sat)[0].getFloat(0), kF16Max);
  EXPECT_EQ((*sat)[0].getFloat(1), -kF16Max);
  auto inf2 = runOp("MatMul", {Tensor::fromFloats(DType::F16, {2, 1}, {300, -300}), big});
  ASSERT_TRUE(inf2);
  EXPECT_TRUE(std::isinf((*inf2)[0].getFloat(0)) && (*inf2)[0].getFloat(0) > 0);
  EXPECT_TRUE(std::isinf((*inf2)[0].getFloat(1)) && (*inf2)[0].getFloat(1) < 0);
}

TEST(BatchMatMulKernel, AllFlagCombinations) {
  const int64_t m = 3, k = 4, n = 2;
  for (Flags f : kAllFlags) {
    Tensor a = randomTensor({DType::F32, stored({2, 3}, m, k, f.ta)}, 21);
    Tensor b = randomTensor({DType::F32, stored({2, 3}, k, n, f.tb)}, 22);
    auto c = runOp("BatchMatMul", {a, b}, flagAttrs(f));
    ASSERT_TRUE(c) << c.message();
    EXPECT_EQ((*c)[0].shape(), (Shape{2, 3, m, n}));
    expectMatches((*c)[0], naiveMatMul(a, b, f, m, k, n));
  }
}

TEST(BatchMatMulKernel, F16OutputRounds) {
  Tensor a = randomTensor({DType::F16, {3, 2, 5}}, 31, -3.0f, 3.0f);
  Tensor b = randomTensor({DType::F16, {3, 5, 4}}, 32, -3.0f, 3.0f);
  auto c = runOp("BatchMatMul", {a, b});
  ASSERT_TRUE(c) << c.message();
  std::vector<double> ref = naiveMatMul(a, b, {false, false}, 2, 5, 4);
  for (size_t i = 0; i < ref.size(); ++i)
    EXPECT_EQ((*c)[0].getFloat(i), Tensor::scalar(DType::F16, ref[i]).getFloat(0)) << i;
}

// fp32_out: the f32 matmul of the inputs widened to f32 (exact), rounded once to f32.
TEST(MatMulKernel, Fp32OutIsTheF32MatMulOfTheWidenedInputs) {
  const int64_t m = 4, k = 9, n = 3;
  for (DType dt : {DType::F16, DType::BF16})
    for (Flags f : kAllFlags)
      for (int bias_kind = 0; bias_kind < 3; ++bias_kind) { // none, inputs' dtype, f32
        Tensor a = randomTensor({dt, stored({}, m, k, f.ta)}, 41, -3.0f, 3.0f);
        Tensor b = randomTensor({dt, stored({}, k, n, f.tb)}, 42, -3.0f, 3.0f);
        Tensor bias = randomTensor({bias_kind == 1 ? dt : DType::F32, {n}}, 43);
        std::vector<Tensor> in = {a, b}, wide_in = {a.castTo(DType::F32), b.castTo(DType::F32)};
        if (bias_kind) {
          in.push_back(bias);
          wide_in.push_back(bias.castTo(DType::F32));
        }
        auto c = runOp("MatMul", in, fp32OutAttrs(f));
        ASSERT_TRUE(c) << c.message();
        ASSERT_EQ((*c)[0].type(), (TensorType{DType::F32, {m, n}}));
        // Independently: the double sum of the widened values, rounded once to f32.
        std::vector<double> ref =
            naiveMatMul(wide_in[0], wide_in[1], f, m, k, n, bias_kind ? &wide_in[2] : nullptr);
        for (int64_t i = 0; i < m * n; ++i)
          EXPECT_EQ((*c)[0].getFloat(i), static_cast<float>(ref[i]))
              << dtypeName(dt) << " bias " << bias_kind << " element " << i;
        // And the same bits as the plain f32 matmul of the widened operands.
        auto f32 = runOp("MatMul", wide_in, flagAttrs(f));
        ASSERT_TRUE(f32) << f32.message();
        EXPECT_EQ((*c)[0], (*f32)[0]);
        // Without fp32_out the result is that sum rounded to the inputs' dtype.
        auto narrow = runOp("MatMul", in, flagAttrs(f));
        ASSERT_TRUE(narrow) << narrow.message();
        EXPECT_EQ((*narrow)[0], (*c)[0].castTo(dt));
      }
}

TEST(BatchMatMulKernel, Fp32OutIsTheF32MatMulOfTheWidenedInputs) {
  for (DType dt : {DType::F16, DType::BF16})
    for (Flags f : kAllFlags) {
      Tensor a = randomTensor({dt, stored({2, 3}, 3, 5, f.ta)}, 51, -3.0f, 3.0f);
      Tensor b = randomTensor({dt, stored({2, 3}, 5, 2, f.tb)}, 52, -3.0f, 3.0f);
      auto c = runOp("BatchMatMul", {a, b}, fp32OutAttrs(f));
      ASSERT_TRUE(c) << c.message();
      ASSERT_EQ((*c)[0].type(), (TensorType{DType::F32, {2, 3, 3, 2}}));
      std::vector<double> ref = naiveMatMul(a.castTo(DType::F32), b.castTo(DType::F32), f, 3, 5, 2);
      for (size_t i = 0; i < ref.size(); ++i)
        EXPECT_EQ((*c)[0].getFloat(static_cast<int64_t>(i)), static_cast<float>(ref[i]))
            << dtypeName(dt) << " element " << i;
    }
}

// With f32 inputs fp32_out changes nothing.
TEST(MatMulKernel, Fp32OutOnF32InputsChangesNothing) {
  for (const char *op : {"MatMul", "BatchMatMul"}) {
    const Shape batch = std::string(op) == "BatchMatMul" ? Shape{2} : Shape{};
    Tensor a = randomTensor({DType::F32, stored(batch, 3, 6, false)}, 61);
    Tensor b = randomTensor({DType::F32, stored(batch, 6, 4, false)}, 62);
    auto on = runOp(op, {a, b}, fp32OutAttrs());
    auto off = runOp(op, {a, b});
    ASSERT_TRUE(on && off);
    EXPECT_EQ((*on)[0], (*off)[0]) << op;
  }
}

// 256 * 300 = 76800 is past f16's 65504: stored as f32 it stays finite and exact;
// stored as f16 it overflows to inf (INFNAN) or clamps to 65504 (saturation).
TEST(MatMulKernel, Fp32OutKeepsAnF16OverflowFinite) {
  for (const char *op : {"MatMul", "BatchMatMul"}) {
    const Shape batch = std::string(op) == "BatchMatMul" ? Shape{1} : Shape{};
    Tensor a = Tensor::fromFloats(DType::F16, stored(batch, 2, 1, false), {256, -256});
    Tensor b = Tensor::fromFloats(DType::F16, stored(batch, 1, 1, false), {300});
    for (OverflowMode mode : {OverflowMode::InfNan, OverflowMode::Saturation}) {
      auto wide = runOp(op, {a, b}, fp32OutAttrs(), mode);
      ASSERT_TRUE(wide) << wide.message();
      EXPECT_EQ((*wide)[0].getFloat(0), 256.0f * 300.0f) << op;
      EXPECT_EQ((*wide)[0].getFloat(1), -256.0f * 300.0f) << op;
    }
    auto inf = runOp(op, {a, b}, {}, OverflowMode::InfNan);
    ASSERT_TRUE(inf) << inf.message();
    EXPECT_EQ((*inf)[0].getFloat(0), std::numeric_limits<float>::infinity()) << op;
    EXPECT_EQ((*inf)[0].getFloat(1), -std::numeric_limits<float>::infinity()) << op;
    auto sat = runOp(op, {a, b}, {}, OverflowMode::Saturation);
    ASSERT_TRUE(sat) << sat.message();
    EXPECT_EQ((*sat)[0].getFloat(0), kF16Max) << op;
  }
}

// The bias of either dtype joins the wide sum before the one rounding to f32:
// 1 + 2^-24 is a tie that f32 rounds to 1, so rounding the product first and
// then adding -1 would give 0; the sum keeps its 2^-24.
TEST(MatMulKernel, Fp32OutAddsTheBiasBeforeTheOneRounding) {
  const float tiny = std::ldexp(1.0f, -24); // the smallest f16 subnormal
  for (DType bias_dt : {DType::F16, DType::F32}) {
    auto c = runOp("MatMul",
                   {Tensor::fromFloats(DType::F16, {1, 2}, {1, 1}),
                    Tensor::fromFloats(DType::F16, {2, 1}, {1, tiny}),
                    Tensor::fromFloats(bias_dt, {1}, {-1})},
                   fp32OutAttrs());
    ASSERT_TRUE(c) << c.message();
    EXPECT_EQ((*c)[0].getFloat(0), tiny) << dtypeName(bias_dt);
  }
  // An f32 bias is kept to f32 precision: 1/3 is no f16 value.
  auto c = runOp("MatMul",
                 {Tensor::fromFloats(DType::F16, {1, 1}, {0}),
                  Tensor::fromFloats(DType::F16, {1, 1}, {0}),
                  Tensor::fromFloats(DType::F32, {1}, {1.0f / 3})},
                 fp32OutAttrs());
  ASSERT_TRUE(c) << c.message();
  EXPECT_EQ((*c)[0].getFloat(0), 1.0f / 3);
}

} // namespace
} // namespace kiln::testing
