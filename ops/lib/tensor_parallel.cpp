// TensorParallelCopy and TensorParallelReduce: shape rules, Megatron's
// gradient pairing (each is the other's backward), and the reference
// kernels of a group of one rank; TensorParallelMax, not differentiable.
#include "ops/op_builder.h"
#include "ops/op_registry.h"

namespace kiln::ops {
namespace {

Expected<std::vector<TensorType>> inferCollective(const std::vector<TensorType> &in,
                                                  const AttrMap &attrs) {
  if (in.size() != 1)
    return Error("expected 1 input, got " + std::to_string(in.size()));
  if (attrs.getInt("ranks") < 1)
    return Error("ranks must be at least 1, got " + std::to_string(attrs.getInt("ranks")));
  return std::vector<TensorType>{in[0]};
}

Expected<std::vector<ValueId>> gradCopy(GradContext &ctx) {
  ValueId dy = ctx.output_grads[0];
  if (dy == kNoValue)
    return std::vector<ValueId>{kNoValue};
  return std::vector<ValueId>{ctx.builder.create("TensorParallelReduce", "dx", {dy},
                                                 {{"ranks", ctx.attrs().getInt("ranks")}})};
}

// Every rank holds the same y and computes the same dy from it.
Expected<std::vector<ValueId>> gradReduce(GradContext &ctx) {
  return std::vector<ValueId>{ctx.output_grads[0]};
}

Status copyKernel(const KernelContext &, const std::vector<const Tensor *> &in,
                  std::vector<Tensor> &out, const AttrMap &) {
  out[0] = *in[0];
  return Status::ok();
}

// A combining collective of a group of one passes its input through.
KernelFn groupOfOne(const char *op) {
  return [op](const KernelContext &, const std::vector<const Tensor *> &in,
              std::vector<Tensor> &out, const AttrMap &attrs) -> Status {
    if (attrs.getInt("ranks") != 1)
      return Error(std::string(op) + " over " + std::to_string(attrs.getInt("ranks")) +
                   " ranks needs every rank's input: it runs in a tensor-parallel group (kiln "
                   "train --tp), not on one device");
    out[0] = *in[0];
    return Status::ok();
  };
}

} // namespace

KILN_REGISTER_OP("TensorParallelCopy", OpImpl{inferCollective, gradCopy, copyKernel});
KILN_REGISTER_OP("TensorParallelReduce",
                 OpImpl{inferCollective, gradReduce, groupOfOne("TensorParallelReduce")});
KILN_REGISTER_OP("TensorParallelMax", OpImpl{inferCollective, {}, groupOfOne("TensorParallelMax")});

} // namespace kiln::ops
