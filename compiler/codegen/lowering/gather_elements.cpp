// Lowerings of GatherElements and GatherElementsGrad
// (ops/lib/gather_elements.cpp): x read at the output's indices with the
// gathered axis replaced by the index element, and its adjoint written as a
// gather: dx[.., j, ..] sums dy[.., k, ..] over the k whose index is j. The
// reference rejects an index outside the axis; a kernel cannot fail, so a
// negative index wraps once and the result is clamped into the axis.
#include <algorithm>

#include "compiler/codegen/op_lowering.h"
#include "ops/kernel_util.h"

namespace kiln::codegen {
namespace {

Expected<std::vector<ExprRef>> lowerGatherElements(LowerContext &ctx) {
  const Shape &x = ctx.inputType(0).shape;
  const int64_t rank = static_cast<int64_t>(x.size());
  auto axis = ops::normalizeAxis(ctx.attrs().getInt("axis"), rank);
  if (!axis)
    return ctx.error(axis.error().message());
  const int64_t extent = x[*axis];
  if (extent == 0 && numElements(ctx.outputType(0).shape) > 0)
    return ctx.error("the gathered axis is empty");
  std::vector<ExprRef> at = LowerContext::vars(rank);
  ExprRef index = convert(ctx.input(1, at), ScalarType::I64);
  index = select(binary(BinaryOp::Lt, index, iconst(0)), index + iconst(extent), index);
  at[*axis] = binary(BinaryOp::Max, binary(BinaryOp::Min, index, iconst(extent - 1)), iconst(0));
  return std::vector<ExprRef>{ctx.input(0, at)};
}

Expected<std::vector<ExprRef>> lowerGatherElementsGrad(LowerContext &ctx) {
  const Shape &x = ctx.outputType(0).shape;
  const Shape &dy = ctx.inputType(0).shape;
  const int64_t rank = static_cast<int64_t>(x.size());
  auto axis = ops::normalizeAxis(ctx.attrs().getInt("axis"), rank);
  if (!axis)
    return ctx.error(axis.error().message());
  // dx[i] for i outside dy's extent on a non-axis dimension is 0.
  std::vector<ExprRef> at = LowerContext::vars(rank);
  ExprRef inside = bconst(true);
  for (int64_t a = 0; a < rank; ++a)
    if (a != *axis && dy[a] < x[a]) {
      inside = binary(BinaryOp::And, inside,
                      binary(BinaryOp::Lt, var(static_cast<int>(a)), iconst(dy[a])));
      at[a] =
          binary(BinaryOp::Min, var(static_cast<int>(a)), iconst(std::max<int64_t>(dy[a] - 1, 0)));
    }
  if (dy[*axis] == 0)
    return std::vector<ExprRef>{fconst(0)};
  const int r = ctx.newReduceVar();
  at[*axis] = rvar(r);
  ExprRef index = convert(ctx.input(1, at), ScalarType::I64);
  index = select(binary(BinaryOp::Lt, index, iconst(0)), index + iconst(x[*axis]), index);
  ExprRef hit = binary(BinaryOp::Eq, index, var(static_cast<int>(*axis)));
  ExprRef sum = reduce(ReduceOp::Sum, r, dy[*axis], select(hit, ctx.input(0, at), fconst(0)));
  return std::vector<ExprRef>{select(inside, sum, fconst(0))};
}

} // namespace

KILN_REGISTER_LOWERING("GatherElements", lowerGatherElements);
KILN_REGISTER_LOWERING("GatherElementsGrad", lowerGatherElementsGrad);

} // namespace kiln::codegen
