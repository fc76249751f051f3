// Shared pieces of shape inference, reference kernels and gradient rules.
#pragma once

#include <string>
#include <vector>

#include "ir/shape.h"
#include "ir/tensor.h"
#include "support/error.h"

namespace kiln::ops {

// Numpy broadcasting of two shapes; an error names both shapes.
Expected<Shape> broadcastShapes(const Shape &a, const Shape &b);
// For every element of `out_shape` (row-major), the flat index of the element
// of `in_shape` it reads under broadcasting (in_shape must broadcast to it).
std::vector<int64_t> broadcastIndexMap(const Shape &in_shape, const Shape &out_shape);
// Maps a possibly negative axis into [0, rank); an error when out of range.
Expected<int64_t> normalizeAxis(int64_t axis, int64_t rank);
// Errors unless every input of `types` has the same dtype.
Status requireSameDType(const std::vector<TensorType> &types, const std::string &what);

// Writes `values` into `out` (of the same element count) rounding per `mode`.
void storeFloats(Tensor &out, const std::vector<float> &values, OverflowMode mode);
// Same, from doubles: each is rounded to f32 first and then to the storage type,
// exactly as an f32 compute unit followed by a store would.
void storeDoubles(Tensor &out, const std::vector<double> &values, OverflowMode mode);

} // namespace kiln::ops
