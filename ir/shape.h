// Static shapes and tensor types (dtype + shape).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/dtype.h"

namespace kiln {

using Shape = std::vector<int64_t>;

// Number of elements; 1 for a scalar (rank 0).
int64_t numElements(const Shape &shape);
// "[2,3,4]"; "[]" for a scalar.
std::string shapeToString(const Shape &shape);
// Row-major strides in elements.
std::vector<int64_t> stridesOf(const Shape &shape);

struct TensorType {
  DType dtype = DType::F32;
  Shape shape;

  int64_t numElements() const { return kiln::numElements(shape); }
  int64_t rank() const { return static_cast<int64_t>(shape.size()); }
  bool operator==(const TensorType &) const = default;
};

// "f16[2,3]".
std::string typeToString(const TensorType &type);

} // namespace kiln
