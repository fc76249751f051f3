// TensorParallelCopy and TensorParallelReduce: shape rules, Megatron's
// gradient pairing (each is the other's backward), and the reference
// kernels of a group of one rank; TensorParallelMax, not differentiable;
// sequence parallelism's TensorParallelAllGather and
// TensorParallelReduceScatter (each the other's backward); ZeRO-3's
// DataParallelGather.
#include <cstring>

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
  if (attrs.has("groups") &&
      (attrs.getInt("groups") < 1 || attrs.getInt("ranks") % attrs.getInt("groups") != 0))
    return Error("groups " + std::to_string(attrs.getInt("groups")) + " must divide the " +
                 std::to_string(attrs.getInt("ranks")) + " ranks");
  return std::vector<TensorType>{in[0]};
}

// The sum runs over the copy's groups of ranks.
Expected<std::vector<ValueId>> gradCopy(GradContext &ctx) {
  ValueId dy = ctx.output_grads[0];
  if (dy == kNoValue)
    return std::vector<ValueId>{kNoValue};
  return std::vector<ValueId>{ctx.builder.create(
      "TensorParallelReduce", "dx", {dy},
      {{"ranks", ctx.attrs().getInt("ranks")}, {"groups", ctx.attrs().getInt("groups")}})};
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

// The all-gather joins `ranks` pieces along `axis`; the reduce-scatter
// keeps one of them.
Expected<std::vector<TensorType>> inferSequence(const std::vector<TensorType> &in,
                                                const AttrMap &attrs, bool gather) {
  if (in.size() != 1)
    return Error("expected 1 input, got " + std::to_string(in.size()));
  const int64_t ranks = attrs.getInt("ranks"), axis = attrs.getInt("axis");
  if (ranks < 1)
    return Error("ranks must be at least 1, got " + std::to_string(ranks));
  if (axis < 0 || axis >= static_cast<int64_t>(in[0].shape.size()))
    return Error("axis " + std::to_string(axis) + " is outside the input's " +
                 std::to_string(in[0].shape.size()) + " axes");
  TensorType out = in[0];
  int64_t &n = out.shape[static_cast<size_t>(axis)];
  if (gather) {
    n *= ranks;
  } else {
    if (n % ranks != 0)
      return Error("axis " + std::to_string(axis) + " of " + std::to_string(n) +
                   " does not split into " + std::to_string(ranks) + " equal pieces");
    n /= ranks;
  }
  return std::vector<TensorType>{out};
}

Expected<std::vector<ValueId>> gradSequence(GradContext &ctx, const char *op) {
  ValueId dy = ctx.output_grads[0];
  if (dy == kNoValue)
    return std::vector<ValueId>{kNoValue};
  return std::vector<ValueId>{ctx.builder.create(
      op, "dx", {dy},
      {{"ranks", ctx.attrs().getInt("ranks")}, {"axis", ctx.attrs().getInt("axis")}})};
}

Expected<std::vector<TensorType>> inferGather(const std::vector<TensorType> &in,
                                              const AttrMap &attrs) {
  if (in.empty() || in.size() > 2 || in[0].shape.size() != 1)
    return Error("expected one flat slice as input (and what it waits for)");
  const int64_t ranks = attrs.getInt("ranks");
  const Shape shape(attrs.getInts("shape").begin(), attrs.getInts("shape").end());
  if (ranks < 1 || in[0].shape[0] != (numElements(shape) + ranks - 1) / ranks)
    return Error("a slice of " + std::to_string(in[0].shape[0]) + " elements over " +
                 std::to_string(ranks) + " ranks is not ceil(" +
                 std::to_string(numElements(shape)) + " / ranks)");
  return std::vector<TensorType>{{in[0].dtype, shape}};
}

// A group of one: the slice is the whole weight and its padding.
Status gatherKernel(const KernelContext &, const std::vector<const Tensor *> &in,
                    std::vector<Tensor> &out, const AttrMap &attrs) {
  if (attrs.getInt("ranks") != 1)
    return Error("DataParallelGather over " + std::to_string(attrs.getInt("ranks")) +
                 " ranks needs every replica's slice: it runs in kiln train --zero 3");
  const size_t bytes = out[0].byteSize();
  std::memcpy(out[0].data(), in[0]->data(), bytes);
  return Status::ok();
}

} // namespace

KILN_REGISTER_OP("DataParallelGather", OpImpl{inferGather, {}, gatherKernel});
KILN_REGISTER_OP("TensorParallelCopy", OpImpl{inferCollective, gradCopy, copyKernel});
KILN_REGISTER_OP("TensorParallelReduce",
                 OpImpl{inferCollective, gradReduce, groupOfOne("TensorParallelReduce")});
KILN_REGISTER_OP("TensorParallelAllGather",
                 OpImpl{[](const std::vector<TensorType> &in, const AttrMap &attrs) {
                          return inferSequence(in, attrs, true);
                        },
                        [](GradContext &ctx) {
                          return gradSequence(ctx, "TensorParallelReduceScatter");
                        },
                        groupOfOne("TensorParallelAllGather")});
KILN_REGISTER_OP("TensorParallelReduceScatter",
                 OpImpl{
                     [](const std::vector<TensorType> &in, const AttrMap &attrs) {
                       return inferSequence(in, attrs, false);
                     },
                     [](GradContext &ctx) { return gradSequence(ctx, "TensorParallelAllGather"); },
                     groupOfOne("TensorParallelReduceScatter")});
KILN_REGISTER_OP("TensorParallelMax", OpImpl{inferCollective, {}, groupOfOne("TensorParallelMax")});

} // namespace kiln::ops
