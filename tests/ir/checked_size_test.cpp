// Element counts and byte sizes never wrap: the checked forms say when a
// size is past int64, the plain ones stop at INT64_MAX.
#include <limits>

#include <gtest/gtest.h>

#include "ir/shape.h"
#include "support/byte_size.h"

namespace kiln {
namespace {

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

TEST(CheckedSize, CountsThatFitAreExact) {
  EXPECT_EQ(checkedNumElements({}), 1);
  EXPECT_EQ(checkedNumElements({2, 3, 4}), 24);
  EXPECT_EQ(checkedNumElements({0, kMax}), 0);
  EXPECT_EQ(checkedByteSize(TensorType{DType::F16, {1024, 1024}}), 2 * 1024 * 1024);
}

// The attention scores of one sequence of 2^31 - 1 tokens: (2^31-1)^2 x 4
// heads fits in int64 as a count (1.8e19 does not), and the f32 bytes do not.
TEST(CheckedSize, SizesPastInt64AreNothing) {
  const int64_t seq = (int64_t{1} << 31) - 1;
  EXPECT_FALSE(checkedNumElements({1, 4, seq, seq}).has_value());
  EXPECT_TRUE(checkedNumElements({1, 1, seq, seq}).has_value());
  EXPECT_FALSE(checkedByteSize(TensorType{DType::F32, {1, 1, seq, seq, 2}}).has_value());
  EXPECT_FALSE(checkedNumElements({-1, 4}).has_value());
  EXPECT_EQ(numElements({1, 4, seq, seq}), kMax) << "saturates, never wraps";
}

TEST(CheckedSize, SaturatingArithmetic) {
  EXPECT_EQ(saturatingAdd(kMax - 1, 5), kMax);
  EXPECT_EQ(saturatingMul(int64_t{1} << 40, int64_t{1} << 40), kMax);
  EXPECT_EQ(saturatingAdd(2, 3), 5);
  EXPECT_EQ(formatBytes(kMax), "8.0 EiB");
  EXPECT_EQ(formatBytes(int64_t{1} << 50), "1.0 PiB");
}

} // namespace
} // namespace kiln
