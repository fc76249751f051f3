// Tensor: storage formats, element conversion, casts with both overflow modes, reshape.
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>

#include <gtest/gtest.h>

#include "ir/float16.h"
#include "ir/tensor.h"

namespace kiln {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

TEST(Tensor, ZeroFilledWithTheRightSize) {
  Tensor t(TensorType{DType::BF16, {2, 3, 4}});
  EXPECT_EQ(t.numElements(), 24);
  EXPECT_EQ(t.byteSize(), 48u);
  for (float v : t.toFloats())
    EXPECT_EQ(v, 0.0f);
  EXPECT_EQ(Tensor(TensorType{DType::I64, {}}).byteSize(), 8u);
  EXPECT_EQ(Tensor(TensorType{DType::Bool, {0, 5}}).byteSize(), 0u);
}

// A view writes into the block it lies in; a copy of the view is
// copy-on-write as any tensor, and the view keeps its block alive.
TEST(Tensor, AViewWritesItsBlockAndCopiesOnWriteWhenShared) {
  std::shared_ptr<uint8_t[]> block(new uint8_t[64]());
  Tensor v = Tensor::view({DType::F32, {4}}, block, 16);
  const uint64_t copied = Tensor::bytesCopied();
  v.dataAs<float>()[0] = 2.5f; // the only holder: written in place
  EXPECT_EQ(Tensor::bytesCopied(), copied);
  float in_block;
  std::memcpy(&in_block, block.get() + 16, 4);
  EXPECT_EQ(in_block, 2.5f);
  Tensor shared = v;
  shared.dataAs<float>()[0] = 7.0f; // shared: the writer copies first
  EXPECT_EQ(Tensor::bytesCopied(), copied + 16);
  EXPECT_EQ(v.getFloat(0), 2.5f);
  std::weak_ptr<uint8_t[]> alive = block;
  block.reset();
  EXPECT_FALSE(alive.expired()); // the view holds it
  v = Tensor();
  EXPECT_TRUE(alive.expired());
  Tensor own = shared.copy();
  EXPECT_FALSE(own.sharesBytesWith(shared));
  EXPECT_EQ(own, shared);
}

TEST(Tensor, FromFloatsStoresTheDTypeFormat) {
  // IEEE bit patterns: 1.0 is 0x3c00 in f16, 0x3f80 in bf16; -2.0 is 0xc000 and 0xc000.
  Tensor h = Tensor::fromFloats(DType::F16, {2}, {1.0f, -2.0f});
  EXPECT_EQ(h.dataAs<uint16_t>()[0], 0x3c00);
  EXPECT_EQ(h.dataAs<uint16_t>()[1], 0xc000);
  Tensor b = Tensor::fromFloats(DType::BF16, {2}, {1.0f, -2.0f});
  EXPECT_EQ(b.dataAs<uint16_t>()[0], 0x3f80);
  EXPECT_EQ(b.dataAs<uint16_t>()[1], 0xc000);
  Tensor f = Tensor::fromFloats(DType::F32, {2, 2}, {0.1f, -0.0f, kInf, 3.0f});
  EXPECT_EQ(f.toFloats(), (std::vector<float>{0.1f, -0.0f, kInf, 3.0f}));
  EXPECT_TRUE(std::signbit(f.getFloat(1)));
}

TEST(Tensor, FromFloatsRoundsToNearestEven) {
  // 0.1 = 1.6 * 2^-4; 0.6 * 1024 = 614.4 rounds to 614, so f16 holds 1638 / 2^14.
  Tensor h = Tensor::fromFloats(DType::F16, {1}, {0.1f});
  EXPECT_EQ(h.dataAs<uint16_t>()[0], 0x2e66);
  EXPECT_EQ(h.getFloat(0), 1638.0f / 16384.0f);
  // 1 + 2^-8 is halfway between two bf16 values: ties to the even one, 1.0.
  Tensor b = Tensor::fromFloats(DType::BF16, {1}, {1.0f + std::ldexp(1.0f, -8)});
  EXPECT_EQ(b.getFloat(0), 1.0f);
}

TEST(Tensor, OverflowModes) {
  Tensor inf = Tensor::fromFloats(DType::F16, {2}, {1e5f, -1e5f}, OverflowMode::InfNan);
  EXPECT_EQ(inf.toFloats(), (std::vector<float>{kInf, -kInf}));
  Tensor sat =
      Tensor::fromFloats(DType::F16, {3}, {1e5f, -1e5f, std::nanf("")}, OverflowMode::Saturation);
  EXPECT_EQ(sat.toFloats(), (std::vector<float>{kF16Max, -kF16Max, 0.0f}));
  Tensor f32 = Tensor::fromFloats(DType::F32, {2}, {kInf, std::nanf("")}, OverflowMode::Saturation);
  EXPECT_EQ(f32.getFloat(0), std::numeric_limits<float>::max());
  EXPECT_EQ(f32.getFloat(1), 0.0f);
}

TEST(Tensor, IntegersKeepEveryBit) {
  const int64_t big = (int64_t{1} << 53) + 1; // not representable as a double
  Tensor t = Tensor::fromInts(DType::I64, {3}, {big, -big, std::numeric_limits<int64_t>::min()});
  EXPECT_EQ(t.getInt(0), big);
  EXPECT_EQ(t.getInt(1), -big);
  EXPECT_EQ(t.getInt(2), std::numeric_limits<int64_t>::min());
  Tensor i = Tensor::fromInts(DType::I32, {2}, {-5, 7});
  EXPECT_EQ(i.dataAs<int32_t>()[0], -5);
  EXPECT_EQ(i.getFloat(1), 7.0f);
  Tensor m = Tensor::fromInts(DType::Bool, {3}, {0, 5, -1});
  EXPECT_EQ(m.dataAs<uint8_t>()[1], 1);
  EXPECT_EQ(m.dataAs<uint8_t>()[2], 1);
}

TEST(Tensor, Scalar) {
  EXPECT_EQ(Tensor::scalar(DType::F16, 0.5).getFloat(0), 0.5f);
  EXPECT_EQ(Tensor::scalar(DType::F16, 1e6, OverflowMode::Saturation).getFloat(0), kF16Max);
  EXPECT_EQ(Tensor::scalar(DType::I64, 9007199254740992.0).getInt(0), int64_t{1} << 53);
  EXPECT_EQ(Tensor::scalar(DType::I32, -3.9).getInt(0), -3);
  EXPECT_EQ(Tensor::scalar(DType::I32, 1e12).getInt(0), std::numeric_limits<int32_t>::max());
  EXPECT_EQ(Tensor::scalar(DType::Bool, 0.5).getInt(0), 1);
  EXPECT_EQ(Tensor::scalar(DType::Bool, 0.0).getInt(0), 0);
  EXPECT_EQ(Tensor::scalar(DType::F32, 2.0).shape(), Shape{});
}

TEST(Tensor, CastBetweenFloats) {
  Tensor f = Tensor::fromFloats(DType::F32, {4}, {0.1f, 1e5f, -1e5f, 3.0f});
  Tensor h = f.castTo(DType::F16);
  EXPECT_EQ(h.dtype(), DType::F16);
  EXPECT_EQ(h.shape(), f.shape());
  EXPECT_EQ(h.toFloats(), (std::vector<float>{1638.0f / 16384.0f, kInf, -kInf, 3.0f}));
  Tensor hs = f.castTo(DType::F16, OverflowMode::Saturation);
  EXPECT_EQ(hs.toFloats(), (std::vector<float>{1638.0f / 16384.0f, kF16Max, -kF16Max, 3.0f}));
  // f16 -> f32 is exact.
  EXPECT_EQ(h.castTo(DType::F32).toFloats(), h.toFloats());
  // f16 -> bf16 -> f32: 3.0 survives, the f16 approximation of 0.1 rounds to 8 bits of mantissa.
  Tensor b = h.castTo(DType::BF16);
  EXPECT_EQ(b.getFloat(3), 3.0f);
  EXPECT_EQ(b.getFloat(0),
            bfloat16ToFloat(floatToBFloat16(1638.0f / 16384.0f, OverflowMode::InfNan)));
}

TEST(Tensor, CastFloatToIntTruncatesAndSaturates) {
  Tensor f = Tensor::fromFloats(DType::F32, {8},
                                {2.7f, -2.7f, 0.5f, std::nanf(""), kInf, -kInf, 3e9f, -3e9f});
  Tensor i = f.castTo(DType::I32);
  const int32_t max = std::numeric_limits<int32_t>::max();
  const int32_t min = std::numeric_limits<int32_t>::min();
  std::vector<int64_t> got;
  for (int64_t k = 0; k < i.numElements(); ++k)
    got.push_back(i.getInt(k));
  EXPECT_EQ(got, (std::vector<int64_t>{2, -2, 0, 0, max, min, max, min}));

  Tensor l = f.castTo(DType::I64);
  EXPECT_EQ(l.getInt(4), std::numeric_limits<int64_t>::max());
  EXPECT_EQ(l.getInt(5), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(l.getInt(6), 3000000000);
  // getInt on a float tensor uses the same rule.
  EXPECT_EQ(f.getInt(3), 0);
  EXPECT_EQ(f.getInt(4), std::numeric_limits<int64_t>::max());
}

TEST(Tensor, CastIntsAndBools) {
  Tensor i = Tensor::fromInts(DType::I32, {4}, {0, 2, -1, 65519});
  Tensor m = i.castTo(DType::Bool);
  EXPECT_EQ(m.toFloats(), (std::vector<float>{0, 1, 1, 1}));
  EXPECT_EQ(m.castTo(DType::I64).getInt(1), 1);
  EXPECT_EQ(i.castTo(DType::I64).getInt(2), -1);
  // Integer to f16 follows float rounding: 65519 rounds down to the largest half.
  EXPECT_EQ(i.castTo(DType::F16).getFloat(3), kF16Max);
  Tensor f = Tensor::fromFloats(DType::F32, {3}, {0.0f, -0.0f, 0.25f});
  EXPECT_EQ(f.castTo(DType::Bool).toFloats(), (std::vector<float>{0, 0, 1}));
  // Large i64 through f32: the nearest float, 2^53.
  Tensor big = Tensor::fromInts(DType::I64, {1}, {(int64_t{1} << 53) + 1});
  EXPECT_EQ(big.castTo(DType::F32).getFloat(0), 9007199254740992.0f);
}

TEST(Tensor, Reshaped) {
  Tensor t = Tensor::fromFloats(DType::F16, {2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor r = t.reshaped({3, 1, 2});
  EXPECT_EQ(r.shape(), (Shape{3, 1, 2}));
  EXPECT_EQ(r.dtype(), DType::F16);
  EXPECT_EQ(r.toFloats(), t.toFloats());
  EXPECT_EQ(t.shape(), (Shape{2, 3})); // the original is unchanged
  EXPECT_FALSE(r == t);
  EXPECT_TRUE(r.reshaped({2, 3}) == t);
  EXPECT_EQ(Tensor::fromFloats(DType::F32, {1}, {4}).reshaped({}).shape(), Shape{});
}

TEST(Tensor, EqualityComparesTypeAndBytes) {
  Tensor a = Tensor::fromFloats(DType::F32, {2}, {1, 2});
  EXPECT_TRUE(a == Tensor::fromFloats(DType::F32, {2}, {1, 2}));
  EXPECT_FALSE(a == Tensor::fromFloats(DType::F32, {2}, {1, 3}));
  EXPECT_FALSE(a == Tensor::fromInts(DType::I32, {2}, {1, 2}));
}

} // namespace
} // namespace kiln
