// The generated kernels' exp (kernels/exp_polynomial.h, emitted inline by
// llvm_scalar_ops.cpp): within 2 ulp of exp across its range, its edges
// (overflow, underflow, subnormal results, NaN), and the same bits as the
// host routines' AVX-512 exp that flash attention uses.
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

#include <gtest/gtest.h>

#include "kernels/host_features.h"
#include "kernels/softmax_rows.h"
#include "ops/op_builder.h"
#include "tests/support/codegen_test_util.h"
#include "tests/support/exp_arguments.h"

namespace kiln::testing {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// exp of `args` by one compiled Exp kernel (checked against the reference
// interpreter on the way).
std::vector<float> compiledExp(const std::vector<float> &args) {
  const auto n = static_cast<int64_t>(args.size());
  Graph g("exp");
  const ValueId x = g.addInput("x", {DType::F32, {n}}, InputRole::Data);
  ops::OpBuilder b(g);
  g.addOutput("y", b.create("Exp", "exp", {x}));
  const ops::TensorMap out =
      expectCompiledMatchesReference(g, {{"x", Tensor::fromFloats(DType::F32, Shape({n}), args)}});
  const Tensor &y = out.at("y");
  return std::vector<float>(y.dataAs<float>(), y.dataAs<float>() + n);
}

// exp's range (testing::expArguments), padded with 1s to whole vectors of
// 16, so that the host routine runs each through its vector form.
std::vector<float> sweep() {
  std::vector<float> args = expArguments();
  while (args.size() % 16)
    args.push_back(1.0f);
  return args;
}

TEST(ExpCodegen, WithinTwoUlpsAcrossItsRange) {
  const std::vector<float> args = sweep();
  const std::vector<float> got = compiledExp(args);
  int worst = 0;
  for (size_t i = 0; i < args.size(); ++i) {
    const float expected = static_cast<float>(std::exp(static_cast<double>(args[i])));
    worst = std::max(worst,
                     std::abs(std::bit_cast<int32_t>(got[i]) - std::bit_cast<int32_t>(expected)));
  }
  EXPECT_LE(worst, 2) << "over " << args.size() << " arguments";
}

TEST(ExpCodegen, EdgesOverflowUnderflowAndNaN) {
  const std::vector<float> got = compiledExp({89.0f, 88.7f, kInf, -kInf, -105.0f, -103.5f, 0.0f,
                                              -0.0f, std::numeric_limits<float>::quiet_NaN()});
  EXPECT_EQ(got[0], kInf);
  EXPECT_TRUE(std::isfinite(got[1]));
  EXPECT_NEAR(got[1], std::exp(88.7f), 2e-7 * std::exp(88.7f));
  EXPECT_EQ(got[2], kInf);
  EXPECT_EQ(got[3], 0.0f);
  EXPECT_EQ(got[4], 0.0f);
  // A subnormal result, rounded once.
  EXPECT_EQ(got[5], static_cast<float>(std::exp(-103.5)));
  EXPECT_EQ(got[6], 1.0f);
  EXPECT_EQ(got[7], 1.0f);
  EXPECT_TRUE(std::isnan(got[8]));
}

TEST(ExpCodegen, TheSameBitsAsTheHostRoutinesExp) {
  if (!kernels::hostHasAvx512())
    GTEST_SKIP() << "the host routines' exp is a libmvec call without AVX-512";
  const std::vector<float> args = sweep();
  const std::vector<float> got = compiledExp(args);
  std::vector<float> host = args;
  kernels::expShiftedSum(host.data(), static_cast<int64_t>(host.size()), 0.0f);
  int64_t differ = 0;
  for (size_t i = 0; i < args.size(); ++i)
    differ += std::bit_cast<uint32_t>(got[i]) != std::bit_cast<uint32_t>(host[i]);
  EXPECT_EQ(differ, 0) << "of " << args.size();
}

} // namespace
} // namespace kiln::testing
