// Rows widened and narrowed (kernels/float_rows.h) against loadFloat and
// storeFloat element by element: the same bits and the same float status,
// in every float dtype and overflow mode, at lengths that exercise the
// vector body and the tail, with the values a row rounds specially.
#include "kernels/float_rows.h"

#include <bit>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "ir/float16.h"
#include "ir/float_status.h"
#include "kernels/library_kernel_util.h"

namespace kiln::kernels {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

std::vector<float> randomRow(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-4.0f, 4.0f);
  std::vector<float> row(static_cast<size_t>(n));
  for (float &x : row)
    x = dist(rng);
  return row;
}

// Values every rounding treats with care, one at a time in an ordinary row.
const float kSpecials[] = {0.0f,
                           -0.0f,
                           kInf,
                           -kInf,
                           std::numeric_limits<float>::quiet_NaN(),
                           std::bit_cast<float>(0x7fa00001u), // a signalling NaN
                           kBF16Max,
                           3.3961e38f, // past bf16's largest, rounds back to it
                           3.4e38f,    // rounds to bf16's inf
                           -3.4e38f,
                           kF16Max * 2,
                           std::numeric_limits<float>::max(),
                           std::numeric_limits<float>::denorm_min(),
                           std::bit_cast<float>(0x007fffffu),  // subnormal, rounds up to normal
                           std::bit_cast<float>(0x80018000u),  // subnormal, a tie
                           std::bit_cast<float>(0x3f808000u),  // a tie, even below
                           std::bit_cast<float>(0x3f818000u)}; // a tie, odd below

struct Stored {
  std::vector<uint8_t> bytes;
  uint32_t status;
};

Stored narrowed(const std::vector<float> &row, DType dtype, OverflowMode mode, bool by_row) {
  Stored s{std::vector<uint8_t>((row.size() + 3) * dtypeSize(dtype), 0xab), 0};
  takeFloatStatus();
  const auto n = static_cast<int64_t>(row.size());
  if (by_row)
    narrowRow(row.data(), n, dtype, mode, s.bytes.data(), 3);
  else
    for (int64_t i = 0; i < n; ++i)
      storeFloat(s.bytes.data(), dtype, 3 + i, row[i], mode);
  s.status = takeFloatStatus();
  return s;
}

TEST(FloatRows, NarrowingEqualsStoreFloatBitForBit) {
  for (DType dtype : {DType::BF16, DType::F16, DType::F32})
    for (OverflowMode mode : {OverflowMode::InfNan, OverflowMode::Saturation})
      for (int64_t n : {1, 7, 16, 37, 300}) {
        std::vector<std::vector<float>> rows = {randomRow(n, 5)};
        for (float special : kSpecials) {
          rows.push_back(randomRow(n, 7));
          rows.back()[static_cast<size_t>(n / 2)] = special;
        }
        for (const auto &row : rows) {
          const Stored by_row = narrowed(row, dtype, mode, true);
          const Stored expected = narrowed(row, dtype, mode, false);
          EXPECT_EQ(by_row.bytes, expected.bytes)
              << dtypeName(dtype) << " " << overflowModeName(mode) << " n " << n << " x "
              << row[static_cast<size_t>(n / 2)];
          EXPECT_EQ(by_row.status, expected.status)
              << dtypeName(dtype) << " " << overflowModeName(mode) << " x "
              << row[static_cast<size_t>(n / 2)];
        }
      }
}

TEST(FloatRows, AnOrdinaryRowRaisesNothing) {
  const std::vector<float> row = randomRow(300, 9);
  for (DType dtype : {DType::BF16, DType::F16, DType::F32})
    EXPECT_EQ(narrowed(row, dtype, OverflowMode::InfNan, true).status, 0u) << dtypeName(dtype);
}

TEST(FloatRows, WideningEqualsLoadFloat) {
  std::vector<float> row = randomRow(300, 3);
  row.insert(row.end(), std::begin(kSpecials), std::end(kSpecials));
  for (DType dtype : {DType::BF16, DType::F16, DType::F32}) {
    const Stored stored = narrowed(row, dtype, OverflowMode::InfNan, false);
    for (int64_t n : {int64_t{1}, int64_t{9}, int64_t{300}, static_cast<int64_t>(row.size())}) {
      std::vector<float> out(static_cast<size_t>(n));
      widenRow(stored.bytes.data(), dtype, 3, n, out.data());
      for (int64_t i = 0; i < n; ++i)
        EXPECT_EQ(std::bit_cast<uint32_t>(out[i]),
                  std::bit_cast<uint32_t>(loadFloat(stored.bytes.data(), dtype, 3 + i)))
            << dtypeName(dtype) << " element " << i;
    }
  }
}

} // namespace
} // namespace kiln::kernels
