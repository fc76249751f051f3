// RotateHalf: rotary embedding's rotate_half on the last axis (Hugging Face,
// non-interleaved): y = concat(-x[..., d/2:], x[..., :d/2]).
#include "ops/op_builder.h"
#include "ops/op_registry.h"

namespace kiln::ops {
namespace {

Expected<std::vector<TensorType>> inferRotateHalf(const std::vector<TensorType> &in,
                                                  const AttrMap &attrs) {
  const TensorType &x = in[0];
  if (x.rank() == 0 || x.shape.back() % 2 != 0)
    return Error("the input " + typeToString(x) +
                 " must have at least one axis and an even last dimension");
  return std::vector<TensorType>{x};
}

// The rotation R satisfies R * R = -I, so its transpose is -R.
Expected<std::vector<ValueId>> gradRotateHalf(GradContext &ctx) {
  ValueId dy = ctx.output_grads[0];
  if (dy == kNoValue)
    return std::vector<ValueId>{kNoValue};
  ValueId rotated = ctx.builder.create("RotateHalf", "rotate", {dy});
  return std::vector<ValueId>{ctx.builder.create("Neg", "dx", {rotated})};
}

Status rotateHalfKernel(const KernelContext &ctx, const std::vector<const Tensor *> &in,
                        std::vector<Tensor> &out, const AttrMap &attrs) {
  const Tensor &x = *in[0];
  Tensor &y = out[0];
  const int64_t d = x.shape().back();
  const int64_t half = d / 2;
  const int64_t rows = d == 0 ? 0 : x.numElements() / d;
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t base = r * d;
    for (int64_t j = 0; j < half; ++j) {
      y.setFloat(base + j, -x.getFloat(base + half + j), ctx.overflow);
      y.setFloat(base + half + j, x.getFloat(base + j), ctx.overflow);
    }
  }
  return Status::ok();
}

} // namespace

KILN_REGISTER_OP("RotateHalf", OpImpl{inferRotateHalf, gradRotateHalf, rotateHalfKernel});

} // namespace kiln::ops
