// CausalMask: hides the keys that lie after each query in the last two axes
// (queries, keys) of attention scores.
#include <cstdint>

#include "ops/op_builder.h"
#include "ops/op_registry.h"

namespace kiln::ops {
namespace {

Expected<std::vector<TensorType>> inferCausalMask(const std::vector<TensorType> &in,
                                                  const AttrMap &) {
  if (in.size() != 1)
    return Error("expected 1 input, got " + std::to_string(in.size()));
  if (in[0].rank() < 2)
    return Error("x must have rank >= 2 ([..., queries, keys]), got " + typeToString(in[0]));
  return std::vector<TensorType>{in[0]};
}

Status causalMaskKernel(const KernelContext &ctx, const std::vector<const Tensor *> &in,
                        std::vector<Tensor> &out, const AttrMap &attrs) {
  const Tensor &x = *in[0];
  Tensor &y = out[0];
  const Shape &shape = y.shape();
  const int64_t q = shape[shape.size() - 2], k = shape.back();
  const int64_t batches = q * k == 0 ? 0 : y.numElements() / (q * k);
  // With fewer queries than keys (a KV cache) query i sits at key position i + k - q.
  const int64_t offset = k - q;
  const float fill = static_cast<float>(attrs.getFloat("fill"));
  for (int64_t b = 0; b < batches; ++b)
    for (int64_t i = 0; i < q; ++i)
      for (int64_t j = 0; j < k; ++j) {
        const int64_t e = (b * q + i) * k + j;
        y.setFloat(e, j > i + offset ? fill : x.getFloat(e), ctx.overflow);
      }
  return Status::ok();
}

Expected<std::vector<ValueId>> gradCausalMask(GradContext &ctx) {
  ValueId dy = ctx.output_grads[0];
  if (dy == kNoValue)
    return std::vector<ValueId>{kNoValue};
  return std::vector<ValueId>{ctx.builder.create("CausalMask", "dx", {dy}, {{"fill", 0.0}})};
}

} // namespace

KILN_REGISTER_OP("CausalMask", OpImpl{inferCausalMask, gradCausalMask, causalMaskKernel});

} // namespace kiln::ops
