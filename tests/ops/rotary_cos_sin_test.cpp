// RotaryCosSin: attribute checks and the tables against std::cos / std::sin of
// the rotary formula, in f32 steps like Hugging Face Qwen and in plain double.
#include <cmath>

#include <gtest/gtest.h>

#include "tests/support/op_test_util.h"

namespace kiln::testing {
namespace {

AttrMap rotaryAttrs(int64_t seq_len, int64_t dim, double base = 10000) {
  return {{"seq_len", seq_len}, {"dim", dim}, {"base", base}};
}

TEST(RotaryCosSinInfer, TwoF32Tables) {
  auto t = inferOp("RotaryCosSin", {}, rotaryAttrs(16, 8));
  ASSERT_TRUE(t) << t.message();
  ASSERT_EQ(t->size(), 2u);
  EXPECT_EQ((*t)[0], (TensorType{DType::F32, {16, 8}}));
  EXPECT_EQ((*t)[1], (TensorType{DType::F32, {16, 8}}));
  // base defaults to 10000.
  EXPECT_TRUE(inferOp("RotaryCosSin", {}, {{"seq_len", int64_t{4}}, {"dim", int64_t{2}}}));
}

TEST(RotaryCosSinInfer, RejectsBadAttributes) {
  EXPECT_TRUE(mentions(inferOp("RotaryCosSin", {}, rotaryAttrs(4, 7)).message(), {"dim", "7"}));
  EXPECT_TRUE(mentions(inferOp("RotaryCosSin", {}, rotaryAttrs(4, 0)).message(), {"dim"}));
  EXPECT_TRUE(mentions(inferOp("RotaryCosSin", {}, rotaryAttrs(0, 8)).message(), {"seq_len"}));
  EXPECT_TRUE(mentions(inferOp("RotaryCosSin", {}, rotaryAttrs(4, 8, 0)).message(), {"base"}));
  EXPECT_TRUE(mentions(inferOp("RotaryCosSin", {}, rotaryAttrs(4, 8, -2)).message(), {"base"}));
  EXPECT_FALSE(inferOp("RotaryCosSin", {}, {{"dim", int64_t{8}}})); // seq_len is required
  EXPECT_FALSE(inferOp("RotaryCosSin", {{DType::F32, {2}}}, rotaryAttrs(4, 8)));
}

// inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim)) and
// freqs = outer(t, inv_freq), every step in f32.
float f32Angle(int64_t t, int64_t i, int64_t dim, double base) {
  const float ratio = static_cast<float>(2 * i) / static_cast<float>(dim);
  const float inv_freq = 1.0f / std::pow(static_cast<float>(base), ratio);
  return static_cast<float>(t) * inv_freq;
}

TEST(RotaryCosSinKernel, MatchesTheFormula) {
  const int64_t seq_len = 64, dim = 16;
  for (double base : {10000.0, 500.0}) {
    auto r = runOp("RotaryCosSin", {}, rotaryAttrs(seq_len, dim, base));
    ASSERT_TRUE(r) << r.message();
    const Tensor &cos_t = (*r)[0], &sin_t = (*r)[1];
    for (int64_t t = 0; t < seq_len; ++t)
      for (int64_t col = 0; col < dim; ++col) {
        const int64_t i = col % (dim / 2); // emb = concat(freqs, freqs)
        const double angle = f32Angle(t, i, dim, base);
        const float c = cos_t.getFloat(t * dim + col), s = sin_t.getFloat(t * dim + col);
        // Against the f32 angle: only the final rounding of cos/sin to f32 differs.
        EXPECT_NEAR(c, std::cos(angle), 1e-7) << t << "," << col;
        EXPECT_NEAR(s, std::sin(angle), 1e-7) << t << "," << col;
        // Against the angle in double: f32 steps err by a few ulps of the angle.
        const double exact = t * std::pow(base, -2.0 * i / dim);
        const double tol = 2e-7 + 5e-7 * exact;
        EXPECT_NEAR(c, std::cos(exact), tol) << t << "," << col;
        EXPECT_NEAR(s, std::sin(exact), tol) << t << "," << col;
      }
  }
}

// Qwen's rotary head: dim 128, base 10000 over a 2048 sequence. Column 0 has
// inv_freq 1, so its angle is the position itself and exact.
TEST(RotaryCosSinKernel, QwenTableIdentities) {
  const int64_t seq_len = 2048, dim = 128;
  auto r = runOp("RotaryCosSin", {}, rotaryAttrs(seq_len, dim));
  ASSERT_TRUE(r) << r.message();
  const Tensor &cos_t = (*r)[0], &sin_t = (*r)[1];
  for (int64_t t = 0; t < seq_len; ++t) {
    EXPECT_EQ(cos_t.getFloat(t * dim), static_cast<float>(std::cos(static_cast<double>(t))));
    EXPECT_EQ(sin_t.getFloat(t * dim), static_cast<float>(std::sin(static_cast<double>(t))));
    for (int64_t col = 0; col < dim; ++col) {
      const float c = cos_t.getFloat(t * dim + col), s = sin_t.getFloat(t * dim + col);
      EXPECT_NEAR(static_cast<double>(c) * c + static_cast<double>(s) * s, 1.0, 3e-7);
      if (col < dim / 2) {
        EXPECT_EQ(c, cos_t.getFloat(t * dim + col + dim / 2));
        EXPECT_EQ(s, sin_t.getFloat(t * dim + col + dim / 2));
      }
      if (t == 0) {
        EXPECT_EQ(c, 1.0f);
        EXPECT_EQ(s, 0.0f);
      }
    }
  }
}

TEST(RotaryCosSin, HasNoGradientRule) {
  EXPECT_FALSE(static_cast<bool>(ops::OpRegistry::builtin().find("RotaryCosSin")->impl.grad));
}

} // namespace
} // namespace kiln::testing
