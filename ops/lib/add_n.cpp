// AddN: the sum of one or more tensors of one type (autodiff uses it to add
// up the gradient contributions of a value used several times).
#include <cstdint>

#include "ops/op_builder.h"
#include "ops/op_registry.h"

namespace kiln::ops {
namespace {

Expected<std::vector<TensorType>> inferAddN(const std::vector<TensorType> &in, const AttrMap &) {
  if (in.empty())
    return Error("AddN needs at least one input");
  for (size_t i = 1; i < in.size(); ++i)
    if (!(in[i] == in[0]))
      return Error("all inputs must have one type (no broadcasting): input 0 is " +
                   typeToString(in[0]) + ", input " + std::to_string(i) + " is " +
                   typeToString(in[i]));
  return std::vector<TensorType>{in[0]};
}

Status addNKernel(const KernelContext &ctx, const std::vector<const Tensor *> &in,
                  std::vector<Tensor> &out, const AttrMap &) {
  Tensor &y = out[0];
  for (const Tensor *x : in)
    if (!(x->type() == y.type()))
      return Error("input " + typeToString(x->type()) + " does not match the output " +
                   typeToString(y.type()));
  if (isFloat(y.dtype())) {
    // Accumulates in double and rounds once.
    for (int64_t i = 0; i < y.numElements(); ++i) {
      double sum = 0;
      for (const Tensor *x : in)
        sum += x->getFloat(i);
      y.setFloat(i, static_cast<float>(sum), ctx.overflow);
    }
  } else {
    // Two's complement wrap-around instead of signed overflow.
    for (int64_t i = 0; i < y.numElements(); ++i) {
      uint64_t sum = 0;
      for (const Tensor *x : in)
        sum += static_cast<uint64_t>(x->getInt(i));
      y.setInt(i, static_cast<int64_t>(sum));
    }
  }
  return Status::ok();
}

Expected<std::vector<ValueId>> gradAddN(GradContext &ctx) {
  ValueId dy = ctx.output_grads[0];
  const size_t n = ctx.node.inputs.size();
  if (dy == kNoValue || !isFloat(ctx.builder.dtype(ctx.input(0))))
    return std::vector<ValueId>(n, kNoValue);
  return std::vector<ValueId>(n, dy);
}

} // namespace

KILN_REGISTER_OP("AddN", OpImpl{inferAddN, gradAddN, addNKernel});

} // namespace kiln::ops
