// Shared pieces of the MatMul tests: the transpose flags, their attributes,
// operand shapes by flag, and inputs on a grid exact in every float dtype.
#pragma once

#include <cmath>

#include "ir/attribute.h"
#include "ir/tensor.h"
#include "tests/support/gradient_check.h"
#include "tests/support/random.h"

namespace kiln::testing {

struct Flags {
  bool ta, tb;
};
inline constexpr Flags kAllFlags[] = {{false, false}, {false, true}, {true, false}, {true, true}};

inline AttrMap flagAttrs(Flags f) { return {{"transpose_a", f.ta}, {"transpose_b", f.tb}}; }

inline AttrMap fp32OutAttrs(Flags f = {false, false}) {
  AttrMap attrs = flagAttrs(f);
  attrs.set("fp32_out", true);
  return attrs;
}

// Random multiples of 1/8 in [-1, 1]: exact in f16 and bf16, and so are x +- 1/8,
// so finite differences of 16-bit inputs probe exactly what they claim to.
inline Tensor gridTensor(TensorType type, uint64_t seed) {
  Tensor r = randomTensor({DType::F32, type.shape}, seed);
  std::vector<float> v(r.numElements());
  for (int64_t i = 0; i < r.numElements(); ++i)
    v[i] = std::round(r.getFloat(i) * 8) / 8;
  return Tensor::fromFloats(type.dtype, type.shape, v);
}

inline GradCheckInput gridInput(TensorType type, uint64_t seed) {
  GradCheckInput in;
  in.value = gridTensor(type, seed);
  in.type = std::move(type);
  return in;
}

// Stored shape of an operand whose logical (untransposed) shape is [rows, cols].
inline Shape stored(Shape batch, int64_t rows, int64_t cols, bool transposed) {
  batch.push_back(transposed ? cols : rows);
  batch.push_back(transposed ? rows : cols);
  return batch;
}

} // namespace kiln::testing
