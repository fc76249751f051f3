// Reshape: the same elements in row-major order under a new shape (one dimension may be -1).
#include <cstring>

#include "ops/op_builder.h"
#include "ops/op_registry.h"

namespace kiln::ops {
namespace {

Expected<std::vector<TensorType>> inferReshape(const std::vector<TensorType> &in,
                                               const AttrMap &attrs) {
  const Shape &requested = attrs.getInts("shape");
  const int64_t count = in[0].numElements();
  Shape shape = requested;
  int64_t inferred_axis = -1;
  int64_t known = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      if (inferred_axis >= 0)
        return Error("shape " + shapeToString(requested) +
                     " has more than one -1; at most one dimension can be inferred");
      inferred_axis = static_cast<int64_t>(i);
      continue;
    }
    if (shape[i] < 0)
      return Error("shape " + shapeToString(requested) + " has dimension " +
                   std::to_string(shape[i]) + "; dimensions must be >= 0 or -1");
    if (__builtin_mul_overflow(known, shape[i], &known))
      return Error("shape " + shapeToString(requested) +
                   " has more elements than a 64-bit count holds");
  }
  if (inferred_axis >= 0) {
    if (known == 0 || count % known != 0)
      return Error("cannot reshape " + typeToString(in[0]) + " to " + shapeToString(requested) +
                   ": " + std::to_string(count) + " elements do not divide into the known " +
                   "dimensions");
    shape[inferred_axis] = count / known;
  } else if (known != count) {
    return Error("cannot reshape " + typeToString(in[0]) + " (" + std::to_string(count) +
                 " elements) to " + shapeToString(requested) + " (" + std::to_string(known) +
                 " elements)");
  }
  return std::vector<TensorType>{{in[0].dtype, shape}};
}

Expected<std::vector<ValueId>> gradReshape(GradContext &ctx) {
  ValueId dy = ctx.output_grads[0];
  if (dy == kNoValue)
    return std::vector<ValueId>{kNoValue};
  return std::vector<ValueId>{
      ctx.builder.create("Reshape", "dx", {dy}, {{"shape", ctx.builder.shape(ctx.input(0))}})};
}

// Row-major order is unchanged, so the bytes are the same.
Status reshapeKernel(const KernelContext &ctx, const std::vector<const Tensor *> &in,
                     std::vector<Tensor> &out, const AttrMap &attrs) {
  if (in[0]->byteSize() > 0)
    std::memcpy(out[0].data(), in[0]->data(), in[0]->byteSize());
  return Status::ok();
}

} // namespace

KILN_REGISTER_OP("Reshape", OpImpl{inferReshape, gradReshape, reshapeKernel});

} // namespace kiln::ops
