// Tests of Dropout: shape inference, the kept fraction and scale, the mask as
// a pure function of (seed, stream, index), and the gradient check.
#include <cmath>
#include <cstdint>

#include <gtest/gtest.h>

#include "tests/support/gradient_check.h"
#include "tests/support/op_test_util.h"
#include "tests/support/random.h"

namespace kiln::testing {
namespace {

Tensor seed(int64_t s) { return Tensor::fromInts(DType::I64, {}, {s}); }

TEST(DropoutInfer, GoodAndBad) {
  const TensorType seed_type{DType::I64, {}};
  auto t = inferOp("Dropout", {f32({4, 8}), seed_type}, {{"p", 0.1}});
  ASSERT_TRUE(t) << t.message();
  EXPECT_EQ((*t)[0], f32({4, 8}));
  EXPECT_FALSE(inferOp("Dropout", {f32({4}), seed_type}, {{"p", 0.1}}));
  EXPECT_FALSE(inferOp("Dropout", {f32({4, 8}), TensorType{DType::I64, {1}}}, {{"p", 0.1}}));
  auto p = inferOp("Dropout", {f32({4, 8}), seed_type}, {{"p", 1.0}});
  ASSERT_FALSE(p);
  EXPECT_NE(p.message().find("[0, 1)"), std::string::npos) << p.message();
}

TEST(Dropout, KeepsAboutOneMinusPScaledAndZeroesTheRest) {
  const Tensor x = randomTensor(f32({256, 128}), 3, 0.5f, 1.5f);
  for (double p : {0.05, 0.5}) {
    const Tensor y = run1("Dropout", {x, seed(7)}, {{"p", p}});
    int64_t kept = 0;
    for (int64_t i = 0; i < x.numElements(); ++i) {
      if (y.getFloat(i) == 0.0f)
        continue;
      ++kept;
      EXPECT_EQ(y.getFloat(i), x.getFloat(i) * static_cast<float>(1.0 / (1.0 - p))) << i;
    }
    const double fraction = static_cast<double>(kept) / static_cast<double>(x.numElements());
    EXPECT_NEAR(fraction, 1.0 - p, 0.01) << "p " << p;
  }
  const Tensor none = run1("Dropout", {x, seed(7)}, {{"p", 0.0}});
  EXPECT_TRUE(none == x);
}

TEST(Dropout, TheMaskIsAFunctionOfSeedStreamAndIndex) {
  const Tensor x = randomTensor(f32({32, 32}), 4, 0.5f, 1.5f);
  const AttrMap attrs{{"p", 0.3}};
  const Tensor a = run1("Dropout", {x, seed(11)}, attrs);
  EXPECT_TRUE(run1("Dropout", {x, seed(11)}, attrs) == a);
  EXPECT_FALSE(run1("Dropout", {x, seed(12)}, attrs) == a);
  EXPECT_FALSE(run1("Dropout", {x, seed(11)}, {{"p", 0.3}, {"stream", int64_t{1}}}) == a);
}

TEST(Dropout, GradientIsTheSameDropout) {
  GradCheckInput s;
  s.type = TensorType{DType::I64, {}};
  s.differentiable = false;
  s.value = seed(5);
  EXPECT_TRUE(checkOpGradient("Dropout", {gradInput(f32({6, 10})), s}, {{"p", 0.4}}));
}

} // namespace
} // namespace kiln::testing
