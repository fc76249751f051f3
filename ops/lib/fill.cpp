// Fill: a constant tensor of a given shape and dtype (the op behind
// OpBuilder::constant).
#include <cmath>
#include <cstdint>
#include <limits>

#include "ops/op_registry.h"

namespace kiln::ops {
namespace {

// Integer tensors hold the value exactly or not at all.
Status checkIntegerValue(double value, DType dtype) {
  double lo = 0, hi = 1;
  if (dtype == DType::I32) {
    lo = std::numeric_limits<int32_t>::min();
    hi = std::numeric_limits<int32_t>::max();
  } else if (dtype == DType::I64) {
    lo = -9223372036854775808.0;
    hi = 9223372036854775807.0; // rounds to 2^63, excluded below
  }
  const bool in_range = value >= lo && (dtype == DType::I64 ? value < hi : value <= hi);
  if (!std::isfinite(value) || std::trunc(value) != value || !in_range)
    return Error("value " + std::to_string(value) + " is not representable in " +
                 std::string(dtypeName(dtype)) +
                 (dtype == DType::Bool ? " (expected 0 or 1)" : " (expected an integer)"));
  return Status::ok();
}

Expected<std::vector<TensorType>> inferFill(const std::vector<TensorType> &in,
                                            const AttrMap &attrs) {
  if (!in.empty())
    return Error("Fill takes no inputs, got " + std::to_string(in.size()));
  const Shape &shape = attrs.getInts("shape");
  for (size_t i = 0; i < shape.size(); ++i)
    if (shape[i] < 0)
      return Error("attribute 'shape' " + shapeToString(shape) + " has a negative dim at index " +
                   std::to_string(i) + "; dims must be >= 0");
  const DType dtype = attrs.getDType("dtype");
  if (!isFloat(dtype))
    KILN_RETURN_IF_ERROR(checkIntegerValue(attrs.getFloat("value"), dtype));
  return std::vector<TensorType>{TensorType{dtype, shape}};
}

Status fillKernel(const KernelContext &ctx, const std::vector<const Tensor *> &,
                  std::vector<Tensor> &out, const AttrMap &attrs) {
  Tensor &y = out[0];
  const double value = attrs.getFloat("value");
  if (isFloat(y.dtype())) {
    for (int64_t i = 0; i < y.numElements(); ++i)
      y.setFloat(i, static_cast<float>(value), ctx.overflow);
  } else {
    for (int64_t i = 0; i < y.numElements(); ++i)
      y.setInt(i, static_cast<int64_t>(value));
  }
  return Status::ok();
}

} // namespace

// A generator: with no inputs there is nothing to differentiate.
KILN_REGISTER_OP("Fill", OpImpl{inferFill, {}, fillKernel});

} // namespace kiln::ops
