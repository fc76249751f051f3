// The gradient norm's sum of squares: close to an exact sum, the same bits
// on any number of threads (a large gradient is split into blocks over the
// cores), and not finite when a gradient holds inf or NaN.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "runtime/gradient_norm.h"
#include "support/splitmix.h"

namespace kiln::runtime {
namespace {

Tensor randomGradient(int64_t n, uint64_t seed) {
  std::vector<float> v(static_cast<size_t>(n));
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = static_cast<float>(
        static_cast<double>(splitmix64(seed * 1000003 + i) >> 11) * 0x1.0p-52 - 1);
  return Tensor::fromFloats(DType::F32, Shape({n}), v);
}

long double exactSquares(const Tensor &t) {
  long double sum = 0;
  for (int64_t i = 0; i < t.numElements(); ++i)
    sum += static_cast<long double>(t.dataAs<float>()[i]) * t.dataAs<float>()[i];
  return sum;
}

TEST(GradientNorm, CloseToTheExactSumAndTheSameOnAnyThreadCount) {
  // Sizes below, at and past a block, with tails that fill no vector.
  std::vector<Tensor> grads = {randomGradient(7, 1), randomGradient(32768, 2),
                               randomGradient(100003, 3), randomGradient(1 << 20, 4)};
  std::vector<const Tensor *> ptrs;
  for (const Tensor &g : grads)
    ptrs.push_back(&g);
  ThreadPool one(1), two(2), five(5);
  const std::vector<double> a = squaresOf(one, ptrs), b = squaresOf(two, ptrs),
                            c = squaresOf(five, ptrs);
  ASSERT_EQ(a.size(), grads.size());
  for (size_t i = 0; i < grads.size(); ++i) {
    const long double exact = exactSquares(grads[i]);
    EXPECT_NEAR(a[i], static_cast<double>(exact), 1e-13 * static_cast<double>(exact)) << i;
    EXPECT_EQ(a[i], b[i]) << "gradient " << i << ": same bits on 1 and 2 threads";
    EXPECT_EQ(a[i], c[i]) << "gradient " << i << ": same bits on 1 and 5 threads";
  }
  double total = 0;
  for (double s : a)
    total += s;
  EXPECT_EQ(sumOfSquares(two, ptrs), total) << "the gradients' sums added in order";
}

// The order gradient_norm.cpp promises, written out: blocks of 32768
// elements, element i of a block squared into lane i % 16, the lanes added
// in lane order, the blocks in block order.
double laneOrderSquares(const Tensor &t) {
  constexpr int64_t kBlock = 32768;
  const float *p = t.dataAs<float>();
  double sum = 0;
  for (int64_t b = 0; b < t.numElements(); b += kBlock) {
    double lanes[16] = {};
    for (int64_t i = 0; i < std::min(kBlock, t.numElements() - b); ++i)
      lanes[i % 16] += static_cast<double>(p[b + i]) * p[b + i];
    double block = 0;
    for (double lane : lanes)
      block += lane;
    sum += block;
  }
  return sum;
}

TEST(GradientNorm, EveryVectorFormAddsInTheSameLaneOrder) {
  // Whichever loop the host runs (AVX-512, AVX2 or plain C++), the bits of
  // the order written out above: a run's norm does not depend on the CPU.
  const std::vector<Tensor> grads = {randomGradient(23, 7), randomGradient(65536 + 40, 8),
                                     randomGradient(300001, 9)};
  ThreadPool pool(2);
  for (const Tensor &g : grads)
    EXPECT_EQ(squaresOf(pool, {&g})[0], laneOrderSquares(g)) << g.numElements() << " elements";
}

TEST(GradientNorm, InfOrNaNMakesTheSumNotFinite) {
  Tensor inf = randomGradient(70000, 5), nan = randomGradient(70000, 6);
  inf.dataAs<float>()[65541] = std::numeric_limits<float>::infinity();
  nan.dataAs<float>()[69999] = std::numeric_limits<float>::quiet_NaN(); // in the scalar tail
  ThreadPool pool(2);
  const std::vector<double> s = squaresOf(pool, {&inf, &nan});
  EXPECT_TRUE(std::isinf(s[0]));
  EXPECT_TRUE(std::isnan(s[1]));
}

} // namespace
} // namespace kiln::runtime
