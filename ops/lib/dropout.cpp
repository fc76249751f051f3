// Dropout: inverted dropout with a mask that is a hash of (seed, stream,
// element index), ir/dropout_mask.h. Its gradient is the same dropout of
// dy: the same seed keeps the same elements and scales them alike.
#include <cmath>
#include <cstdint>

#include "ir/dropout_mask.h"
#include "ops/op_builder.h"
#include "ops/op_registry.h"

namespace kiln::ops {
namespace {

Expected<std::vector<TensorType>> inferDropout(const std::vector<TensorType> &in,
                                               const AttrMap &attrs) {
  if (in.size() != 2)
    return Error("expected 2 inputs (x, seed), got " + std::to_string(in.size()));
  if (in[0].rank() != 2)
    return Error("x must be [rows, cols], got " + typeToString(in[0]));
  if (in[1].dtype != DType::I64 || in[1].rank() != 0)
    return Error("seed must be an i64 scalar, got " + typeToString(in[1]));
  const double p = attrs.getFloat("p");
  if (!(p >= 0 && p < 1))
    return Error("p must be in [0, 1), got " + std::to_string(p));
  return std::vector<TensorType>{in[0]};
}

Status dropoutKernel(const KernelContext &ctx, const std::vector<const Tensor *> &in,
                     std::vector<Tensor> &out, const AttrMap &attrs) {
  const Tensor &x = *in[0];
  const uint64_t seed = static_cast<uint64_t>(in[1]->getInt(0));
  const double p = attrs.getFloat("p");
  const int64_t stream = attrs.getInt("stream");
  const float scale = dropoutScale(p);
  for (int64_t i = 0; i < x.numElements(); ++i)
    out[0].setFloat(i, dropoutKeeps(seed, stream, i, p) ? x.getFloat(i) * scale : 0.0f,
                    ctx.overflow);
  return Status::ok();
}

Expected<std::vector<ValueId>> gradDropout(GradContext &ctx) {
  ValueId dy = ctx.output_grads[0];
  if (dy == kNoValue)
    return std::vector<ValueId>{kNoValue, kNoValue};
  return std::vector<ValueId>{ctx.builder.create("Dropout", "dx", {dy, ctx.input(1)}, ctx.attrs()),
                              kNoValue};
}

} // namespace

KILN_REGISTER_OP("Dropout", OpImpl{inferDropout, gradDropout, dropoutKernel});

} // namespace kiln::ops
