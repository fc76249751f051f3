// Trilu: the upper or lower triangle of the last two axes, the rest zeroed
// (shape inference, gradient rule, reference kernel).
#include "ops/op_builder.h"
#include "ops/op_registry.h"

namespace kiln::ops {
namespace {

Expected<std::vector<TensorType>> inferTrilu(const std::vector<TensorType> &in, const AttrMap &) {
  if (in.size() != 1)
    return Error("expected 1 input, got " + std::to_string(in.size()));
  if (in[0].rank() < 2)
    return Error("needs rank 2 or more (the last two axes are the matrix), got " +
                 typeToString(in[0]));
  return std::vector<TensorType>{in[0]};
}

// Whether element (i, j) of a matrix is kept.
bool kept(int64_t i, int64_t j, bool upper, int64_t k) { return upper ? j - i >= k : j - i <= k; }

Status triluKernel(const KernelContext &ctx, const std::vector<const Tensor *> &in,
                   std::vector<Tensor> &out, const AttrMap &attrs) {
  const Tensor &x = *in[0];
  Tensor &y = out[0];
  const Shape &s = x.shape();
  const int64_t rows = s[s.size() - 2], cols = s[s.size() - 1];
  const bool upper = attrs.getBool("upper");
  const int64_t k = attrs.getInt("k");
  for (int64_t e = 0; e < y.numElements(); ++e) {
    const int64_t j = e % cols, i = (e / cols) % rows;
    const bool keep = kept(i, j, upper, k);
    if (isFloat(y.dtype()))
      y.setFloat(e, keep ? x.getFloat(e) : 0.0f, ctx.overflow);
    else
      y.setInt(e, keep ? x.getInt(e) : 0);
  }
  return Status::ok();
}

// Linear: the gradient keeps the same triangle.
Expected<std::vector<ValueId>> gradTrilu(GradContext &ctx) {
  ValueId dy = ctx.output_grads[0];
  if (dy == kNoValue || !isFloat(ctx.builder.dtype(dy)))
    return std::vector<ValueId>{kNoValue};
  return std::vector<ValueId>{ctx.builder.create("Trilu", "dx", {dy}, ctx.attrs())};
}

} // namespace

KILN_REGISTER_OP("Trilu", OpImpl{inferTrilu, gradTrilu, triluKernel});

} // namespace kiln::ops
