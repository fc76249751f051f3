// gemmDnnlBlock: every split of a matmul into blocks of rows, columns or
// batches (the executor's split depends on the shape and the host's cores)
// computes the product, and the same split gives the same bits every time.
// Splits by batches give the whole's bits; oneDNN's blocking of k follows
// the block's rows and columns, so other splits round differently.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/gemm.h"

namespace kiln::kernels {
namespace {

struct Case {
  DType dtype;
  bool transpose_a, transpose_b;
};

// Random values exact in bf16, stored as `dtype`.
std::vector<uint8_t> randomMatrix(int64_t elements, DType dtype, std::vector<double> &values,
                                  std::mt19937 &rng) {
  std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
  const size_t width = dtype == DType::BF16 ? 2 : 4;
  std::vector<uint8_t> bytes(static_cast<size_t>(elements) * width);
  values.resize(static_cast<size_t>(elements));
  for (int64_t i = 0; i < elements; ++i) {
    float f = dist(rng);
    uint32_t bits;
    std::memcpy(&bits, &f, 4);
    bits &= 0xFFFF0000u;
    std::memcpy(&f, &bits, 4);
    values[static_cast<size_t>(i)] = f;
    if (dtype == DType::BF16) {
      const uint16_t high = static_cast<uint16_t>(bits >> 16);
      std::memcpy(bytes.data() + i * 2, &high, 2);
    } else {
      std::memcpy(bytes.data() + i * 4, &f, 4);
    }
  }
  return bytes;
}

class GemmBlocks : public ::testing::TestWithParam<Case> {};

TEST_P(GemmBlocks, AnySplitGivesTheWholeProductsBits) {
  const Case c = GetParam();
  if (c.dtype == DType::BF16 && !hostHasBf16Gemm())
    GTEST_SKIP() << "no bf16 units";
  GemmPlan plan;
  plan.batch = 3;
  plan.m = 96;
  plan.n = 80;
  plan.k = 520;
  plan.transpose_a = c.transpose_a;
  plan.transpose_b = c.transpose_b;
  std::mt19937 rng(7);
  std::vector<double> av, bv;
  const auto a = randomMatrix(plan.batch * plan.m * plan.k, c.dtype, av, rng);
  const auto b = randomMatrix(plan.batch * plan.k * plan.n, c.dtype, bv, rng);
  const int64_t size = plan.batch * plan.m * plan.n;
  auto product = [&](const std::vector<GemmBlock> &blocks) {
    std::vector<float> out(static_cast<size_t>(size), std::nanf(""));
    for (const GemmBlock &block : blocks)
      EXPECT_TRUE(gemmDnnlBlock(plan, c.dtype, a.data(), b.data(), block, out.data()));
    return out;
  };
  // The product against a float64 one (f32 accumulation over k = 520).
  auto check = [&](const std::vector<float> &got, const char *what) {
    for (int64_t q = 0; q < plan.batch; ++q)
      for (int64_t i = 0; i < plan.m; ++i)
        for (int64_t j = 0; j < plan.n; ++j) {
          double want = 0;
          for (int64_t l = 0; l < plan.k; ++l)
            want += av[q * plan.m * plan.k + (c.transpose_a ? l * plan.m + i : i * plan.k + l)] *
                    bv[q * plan.k * plan.n + (c.transpose_b ? j * plan.k + l : l * plan.n + j)];
          ASSERT_NEAR(got[(q * plan.m + i) * plan.n + j], want, 1e-3)
              << what << ": batch " << q << " (" << i << ", " << j << ")";
        }
  };
  auto same = [](const std::vector<float> &x, const std::vector<float> &y) {
    return std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0;
  };
  const std::vector<float> whole = product({{0, 3, 0, 96, 0, 80}});
  check(whole, "whole");
  EXPECT_TRUE(same(product({{0, 1, 0, 96, 0, 80}, {1, 3, 0, 96, 0, 80}}), whole)) << "batches";
  const std::vector<std::pair<const char *, std::vector<GemmBlock>>> splits = {
      {"rows", {{0, 3, 0, 48, 0, 80}, {0, 3, 48, 96, 0, 80}}},
      {"columns", {{0, 3, 0, 96, 0, 32}, {0, 3, 0, 96, 32, 80}}},
      {"uneven", {{0, 3, 0, 17, 0, 80}, {0, 3, 17, 96, 0, 33}, {0, 3, 17, 96, 33, 80}}},
  };
  for (const auto &[what, blocks] : splits) {
    const std::vector<float> split = product(blocks);
    check(split, what);
    EXPECT_TRUE(same(product(blocks), split)) << what << ": a second run differs";
  }
}

INSTANTIATE_TEST_SUITE_P(
    Operands, GemmBlocks,
    ::testing::Values(Case{DType::F32, false, false}, Case{DType::F32, true, false},
                      Case{DType::F32, false, true}, Case{DType::BF16, false, false},
                      Case{DType::BF16, true, false}, Case{DType::BF16, false, true},
                      Case{DType::BF16, true, true}));

} // namespace
} // namespace kiln::kernels
