#include "ops/kernel_util.h"

#include <algorithm>

namespace kiln::ops {

Expected<Shape> broadcastShapes(const Shape &a, const Shape &b) {
  size_t rank = std::max(a.size(), b.size());
  Shape out(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da != db && da != 1 && db != 1)
      return Error("shapes " + shapeToString(a) + " and " + shapeToString(b) + " do not broadcast");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

std::vector<int64_t> broadcastIndexMap(const Shape &in_shape, const Shape &out_shape) {
  const size_t rank = out_shape.size();
  const size_t offset = rank - in_shape.size();
  std::vector<int64_t> in_strides = stridesOf(in_shape);
  // Stride of each output axis in the input; 0 where the input broadcasts.
  std::vector<int64_t> stride(rank, 0);
  for (size_t i = offset; i < rank; ++i)
    stride[i] = in_shape[i - offset] == 1 ? 0 : in_strides[i - offset];
  const int64_t n = numElements(out_shape);
  std::vector<int64_t> map(n);
  std::vector<int64_t> index(rank, 0);
  int64_t flat_in = 0;
  for (int64_t k = 0; k < n; ++k) {
    map[k] = flat_in;
    for (int64_t axis = static_cast<int64_t>(rank) - 1; axis >= 0; --axis) {
      if (++index[axis] < out_shape[axis]) {
        flat_in += stride[axis];
        break;
      }
      flat_in -= stride[axis] * (out_shape[axis] - 1);
      index[axis] = 0;
    }
  }
  return map;
}

Expected<int64_t> normalizeAxis(int64_t axis, int64_t rank) {
  int64_t a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a >= std::max<int64_t>(rank, 1))
    return Error("axis " + std::to_string(axis) + " is out of range for rank " +
                 std::to_string(rank));
  return a;
}

Status requireSameDType(const std::vector<TensorType> &types, const std::string &what) {
  for (const TensorType &t : types)
    if (t.dtype != types.front().dtype)
      return Error(what + " must have one dtype, got " + typeToString(types.front()) + " and " +
                   typeToString(t));
  return Status::ok();
}

void storeFloats(Tensor &out, const std::vector<float> &values, OverflowMode mode) {
  for (size_t i = 0; i < values.size(); ++i)
    out.setFloat(static_cast<int64_t>(i), values[i], mode);
}

void storeDoubles(Tensor &out, const std::vector<double> &values, OverflowMode mode) {
  for (size_t i = 0; i < values.size(); ++i)
    out.setFloat(static_cast<int64_t>(i), static_cast<float>(values[i]), mode);
}

} // namespace kiln::ops
