// Lowerings of ReduceSum, ReduceMean, ReduceMax and ReduceMin
// (ops/lib/reduce.cpp) and SumToShape (ops/lib/broadcast.cpp): f32 sums (or
// extrema) nested one reduce() per reduced axis.
#include "compiler/codegen/op_lowering.h"
#include "ops/kernel_util.h"

namespace kiln::codegen {
namespace {

using Bodies = Expected<std::vector<ExprRef>>;

// Sums x over the axes where `reduced` is set, one rvar per axis of extent > 1 (an extent-1 axis
// is read at 0); the other axes of x are read at `kept[a]`. The outer axes' reductions are the
// outer loops, so the innermost loop walks x's innermost reduced axis.
ExprRef sumOver(LowerContext &ctx, const std::vector<bool> &reduced, std::vector<ExprRef> kept,
                ReduceOp op = ReduceOp::Sum) {
  const Shape &in = ctx.inputType(0).shape;
  std::vector<std::pair<int, int64_t>> loops; // rvar id, extent
  for (size_t a = 0; a < in.size(); ++a) {
    if (!reduced[a])
      continue;
    if (in[a] == 1) {
      kept[a] = iconst(0);
      continue;
    }
    const int r = ctx.newReduceVar();
    kept[a] = rvar(r);
    loops.emplace_back(r, in[a]);
  }
  ExprRef body = ctx.input(0, kept);
  for (size_t k = loops.size(); k-- > 0;)
    body = reduce(op, loops[k].first, loops[k].second, body);
  return body;
}

// Axes as ops::planReduction reads them: empty means all; negative axes count from the end.
Bodies lowerReduce(LowerContext &ctx, bool mean, ReduceOp op = ReduceOp::Sum) {
  const Shape &in = ctx.inputType(0).shape;
  const int64_t rank = static_cast<int64_t>(in.size());
  const std::vector<int64_t> &axes = ctx.attrs().getInts("axes");
  const bool keepdims = ctx.attrs().getBool("keepdims");
  std::vector<bool> reduced(rank, axes.empty());
  for (int64_t axis : axes) {
    auto a = ops::normalizeAxis(axis, rank);
    if (!a || rank == 0)
      return ctx.error("axis " + std::to_string(axis) + " is out of range for the input " +
                       shapeToString(in));
    if (reduced[*a])
      return ctx.error("axes " + shapeToString(axes) + " names axis " + std::to_string(*a) +
                       " twice");
    reduced[*a] = true;
  }
  // Kept axes read the output's vars; with keepdims a reduced axis still takes an output axis.
  std::vector<ExprRef> kept(rank);
  int64_t count = 1;
  int out_axis = 0;
  for (int64_t a = 0; a < rank; ++a) {
    if (reduced[a])
      count *= in[a];
    if (!reduced[a])
      kept[a] = var(out_axis);
    if (!reduced[a] || keepdims)
      ++out_axis;
  }
  ExprRef sum = sumOver(ctx, reduced, std::move(kept), op);
  if (mean && count != 1) // 0/0 = NaN for an empty reduction, as the reference
    sum = sum / fconst(static_cast<double>(count));
  return std::vector<ExprRef>{sum};
}

Bodies lowerReduceSum(LowerContext &ctx) { return lowerReduce(ctx, false); }
Bodies lowerReduceMean(LowerContext &ctx) { return lowerReduce(ctx, true); }
Bodies lowerReduceMax(LowerContext &ctx) { return lowerReduce(ctx, false, ReduceOp::Max); }
Bodies lowerReduceMin(LowerContext &ctx) { return lowerReduce(ctx, false, ReduceOp::Min); }

// The axes that broadcasting `shape` to x would stretch are summed: x's leading axes beyond
// shape's rank, and the size-1 axes of shape where x is larger.
Bodies lowerSumToShape(LowerContext &ctx) {
  const Shape &in = ctx.inputType(0).shape;
  const Shape &out = ctx.outputType(0).shape;
  if (out.size() > in.size())
    return ctx.error("shape " + shapeToString(out) + " has more axes than the input " +
                     shapeToString(in));
  const size_t lead = in.size() - out.size();
  std::vector<bool> reduced(in.size(), false);
  std::vector<ExprRef> kept(in.size());
  for (size_t a = 0; a < in.size(); ++a) {
    if (a < lead) {
      reduced[a] = true;
      continue;
    }
    const int64_t target = out[a - lead];
    if (target == in[a])
      kept[a] = in[a] == 1 ? iconst(0) : var(static_cast<int>(a - lead));
    else if (target == 1)
      reduced[a] = true;
    else
      return ctx.error("shape " + shapeToString(out) + " does not broadcast to the input " +
                       shapeToString(in));
  }
  return std::vector<ExprRef>{sumOver(ctx, reduced, std::move(kept))};
}

} // namespace

KILN_REGISTER_LOWERING("ReduceSum", lowerReduceSum);
KILN_REGISTER_LOWERING("ReduceMean", lowerReduceMean);
KILN_REGISTER_LOWERING("ReduceMax", lowerReduceMax);
KILN_REGISTER_LOWERING("ReduceMin", lowerReduceMin);
KILN_REGISTER_LOWERING("SumToShape", lowerSumToShape);

} // namespace kiln::codegen
