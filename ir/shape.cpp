#include "ir/shape.h"

#include <limits>

namespace kiln {

std::optional<int64_t> checkedNumElements(const Shape &shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    if (d < 0 || __builtin_mul_overflow(n, d, &n))
      return std::nullopt;
  return n;
}

std::optional<int64_t> checkedByteSize(const TensorType &type) {
  const std::optional<int64_t> n = checkedNumElements(type.shape);
  int64_t bytes = 0;
  if (!n || __builtin_mul_overflow(*n, static_cast<int64_t>(dtypeSize(type.dtype)), &bytes))
    return std::nullopt;
  return bytes;
}

int64_t saturatingAdd(int64_t a, int64_t b) {
  int64_t r = 0;
  return __builtin_add_overflow(a, b, &r) ? std::numeric_limits<int64_t>::max() : r;
}

int64_t saturatingMul(int64_t a, int64_t b) {
  int64_t r = 0;
  return __builtin_mul_overflow(a, b, &r) ? std::numeric_limits<int64_t>::max() : r;
}

int64_t numElements(const Shape &shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n = saturatingMul(n, d);
  return n;
}

std::string shapeToString(const Shape &shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i)
      s += ",";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

std::vector<int64_t> stridesOf(const Shape &shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (int64_t i = static_cast<int64_t>(shape.size()) - 2; i >= 0; --i)
    strides[i] = strides[i + 1] * shape[i + 1];
  return strides;
}

std::string typeToString(const TensorType &type) {
  return std::string(dtypeName(type.dtype)) + shapeToString(type.shape);
}

} // namespace kiln
