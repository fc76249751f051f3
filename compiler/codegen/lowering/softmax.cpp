// Lowerings of Softmax and SoftmaxGrad (ops/lib/softmax.cpp) as row kernels:
// the row's max and sum are stages of their own, held in f32 for the row.
#include "compiler/codegen/op_lowering.h"
#include "ops/kernel_util.h"

namespace kiln::codegen {
namespace {

using Bodies = Expected<std::vector<ExprRef>>;

// `indices` with the element at `axis` replaced.
std::vector<ExprRef> at(std::vector<ExprRef> indices, int64_t axis, ExprRef index) {
  indices[axis] = std::move(index);
  return indices;
}

// The output's shape, its indices, the softmax axis and the shape of one
// per-row result (the axis set to 1).
struct Rows {
  Shape shape;
  std::vector<ExprRef> idx;
  int64_t axis = 0;
  Shape row_shape;
};

Expected<Rows> rowsOf(const LowerContext &ctx) {
  Rows r;
  r.shape = ctx.outputType(0).shape;
  const int64_t rank = static_cast<int64_t>(r.shape.size());
  auto axis = ops::normalizeAxis(ctx.attrs().getInt("axis"), rank);
  if (!axis)
    return ctx.error(axis.message());
  r.axis = *axis;
  r.idx = LowerContext::vars(rank);
  r.row_shape = r.shape;
  r.row_shape[r.axis] = 1;
  return r;
}

Bodies lowerSoftmax(LowerContext &ctx) {
  if (ctx.outputType(0).shape.empty())
    return std::vector<ExprRef>{fconst(1)};
  KILN_ASSIGN_OR_RETURN(Rows rows, rowsOf(ctx));
  const auto &[shape, idx, axis, row_shape] = rows;
  const std::vector<ExprRef> row_idx = at(idx, axis, iconst(0));

  int r = ctx.newReduceVar();
  int max =
      ctx.addStage("max", row_shape, ScalarType::F32,
                   reduce(ReduceOp::Max, r, shape[axis], ctx.input(0, at(idx, axis, rvar(r)))));
  // exp(x - max) once per element, held for the row: its sum and the output read it.
  int e = ctx.addStage("exp", shape, ScalarType::F32,
                       unary(UnaryOp::Exp, ctx.input(0, idx) - ctx.read(max, row_idx)),
                       /*held=*/true);
  r = ctx.newReduceVar();
  int sum =
      ctx.addStage("sum", row_shape, ScalarType::F32,
                   reduce(ReduceOp::Sum, r, shape[axis], ctx.read(e, at(idx, axis, rvar(r)))));
  return std::vector<ExprRef>{ctx.read(e, idx) / ctx.read(sum, row_idx)};
}

// dx = y * (dy - sum(dy * y, axis)).
Bodies lowerSoftmaxGrad(LowerContext &ctx) {
  if (ctx.outputType(0).shape.empty())
    return std::vector<ExprRef>{fconst(0)};
  KILN_ASSIGN_OR_RETURN(Rows rows, rowsOf(ctx));
  const auto &[shape, idx, axis, row_shape] = rows;
  int r = ctx.newReduceVar();
  const std::vector<ExprRef> along = at(idx, axis, rvar(r));
  int dot = ctx.addStage(
      "dot", row_shape, ScalarType::F32,
      reduce(ReduceOp::Sum, r, shape[axis], ctx.input(1, along) * ctx.input(0, along)));
  ExprRef y = ctx.input(0, idx), dy = ctx.input(1, idx);
  return std::vector<ExprRef>{y * (dy - ctx.read(dot, at(idx, axis, iconst(0))))};
}

} // namespace

KILN_REGISTER_LOWERING("Softmax", lowerSoftmax);
KILN_REGISTER_LOWERING("SoftmaxGrad", lowerSoftmaxGrad);

} // namespace kiln::codegen
