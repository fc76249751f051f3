// Static shapes and tensor types (dtype + shape).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ir/dtype.h"

namespace kiln {

using Shape = std::vector<int64_t>;

// Number of elements; 1 for a scalar (rank 0). A count past int64 gives
// INT64_MAX, never a wrapped number: graphs with such values are refused
// where they are built (checkedByteSize), this only keeps stray uses honest.
int64_t numElements(const Shape &shape);
// The element count, multiplied with overflow checks; nothing when a
// dimension is negative or the count is past int64.
std::optional<int64_t> checkedNumElements(const Shape &shape);
// Sums and products of sizes that stop at INT64_MAX instead of wrapping.
int64_t saturatingAdd(int64_t a, int64_t b);
int64_t saturatingMul(int64_t a, int64_t b);
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

// The bytes of a value of `type`, checked as checkedNumElements.
std::optional<int64_t> checkedByteSize(const TensorType &type);

// "f16[2,3]".
std::string typeToString(const TensorType &type);

} // namespace kiln
