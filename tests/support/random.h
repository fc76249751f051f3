// Deterministic random tensors for tests.
#pragma once

#include <cstdint>

#include "ir/tensor.h"

namespace kiln::testing {

// Uniform in [lo, hi), stored in `type.dtype` (rounded), from `seed`.
Tensor randomTensor(const TensorType &type, uint64_t seed, float lo = -1.0f, float hi = 1.0f);
// Uniform integers in [0, bound).
Tensor randomIndices(const TensorType &type, uint64_t seed, int64_t bound);

} // namespace kiln::testing
