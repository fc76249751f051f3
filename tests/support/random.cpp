#include "tests/support/random.h"

#include <random>

namespace kiln::testing {

Tensor randomTensor(const TensorType &type, uint64_t seed, float lo, float hi) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  Tensor t(type);
  for (int64_t i = 0; i < t.numElements(); ++i)
    t.setFloat(i, dist(rng), OverflowMode::InfNan);
  return t;
}

Tensor randomIndices(const TensorType &type, uint64_t seed, int64_t bound) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int64_t> dist(0, bound - 1);
  Tensor t(type);
  for (int64_t i = 0; i < t.numElements(); ++i)
    t.setInt(i, dist(rng));
  return t;
}

} // namespace kiln::testing
