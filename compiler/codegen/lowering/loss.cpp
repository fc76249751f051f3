// Lowerings of CrossEntropyLoss and CrossEntropyLossGrad (ops/lib/cross_entropy.cpp): row max
// and log-sum-exp stages over logits [N, V], then the mean over rows not labelled ignore_index.
#include "compiler/codegen/op_lowering.h"

namespace kiln::codegen {
namespace {

using Bodies = Expected<std::vector<ExprRef>>;

Status checkShapes(const LowerContext &ctx) {
  const Shape &logits = ctx.inputType(0).shape;
  const Shape &labels = ctx.inputType(1).shape;
  if (logits.size() != 2 || logits[1] < 1 || labels.size() != 1 || labels[0] != logits[0])
    return ctx.error("needs logits [N, V] with V >= 1 and labels [N]");
  return Status::ok();
}

// Whether a row with `label` takes part.
ExprRef isKept(const LowerContext &ctx, ExprRef label) {
  return binary(BinaryOp::Ne, std::move(label), iconst(ctx.attrs().getInt("ignore_index")));
}

// The number of rows that take part, counted in f32 (exact up to 2^24 rows) as it is only
// ever a divisor.
ExprRef keptRows(LowerContext &ctx, int64_t rows) {
  const int r = ctx.newReduceVar();
  return reduce(ReduceOp::Sum, r, rows,
                select(isKept(ctx, ctx.input(1, {rvar(r)})), fconst(1), fconst(0)));
}

// loss = sum over kept rows r of (lse[r] - logits[r, label[r]]) / max(count, 1): every term of
// an all-ignored batch is 0, so dividing by 1 gives the reference's 0 for it. Each term is
// divided before the sum, so the output is a plain sum over rows: the kernel takes the rows as
// its own, in parallel tiles (a row sum), instead of one row holding the whole batch. The
// count is an [N] stage so that each row counts the kept rows itself (N compares per row,
// against V exps).
Bodies lowerCrossEntropyLoss(LowerContext &ctx) {
  KILN_RETURN_IF_ERROR(checkShapes(ctx));
  const int64_t n = ctx.inputType(0).shape[0], v = ctx.inputType(0).shape[1];
  int r = ctx.newReduceVar();
  const int max = ctx.addStage("max", {n}, ScalarType::F32,
                               reduce(ReduceOp::Max, r, v, ctx.input(0, {var(0), rvar(r)})));
  r = ctx.newReduceVar();
  ExprRef row_max = ctx.read(max, {var(0)});
  ExprRef sum =
      reduce(ReduceOp::Sum, r, v, unary(UnaryOp::Exp, ctx.input(0, {var(0), rvar(r)}) - row_max));
  const int lse = ctx.addStage("lse", {n}, ScalarType::F32, row_max + unary(UnaryOp::Log, sum));
  const int count = ctx.addStage("count", {n}, ScalarType::F32, keptRows(ctx, n));

  r = ctx.newReduceVar();
  ExprRef label = ctx.input(1, {rvar(r)});
  // An ignored row's label (-100) must not index the logits even in the untaken arm; the
  // reference rejects other labels outside [0, V), which a kernel cannot, so all are clamped.
  ExprRef column = binary(BinaryOp::Max, binary(BinaryOp::Min, label, iconst(v - 1)), iconst(0));
  ExprRef term = (ctx.read(lse, {rvar(r)}) - ctx.input(0, {rvar(r), column})) /
                 binary(BinaryOp::Max, ctx.read(count, {rvar(r)}), fconst(1));
  return std::vector<ExprRef>{
      reduce(ReduceOp::Sum, r, n, select(isKept(ctx, label), term, fconst(0)))};
}

// dlogits[i, j] = (softmax(logits[i])[j] - (j == label[i])) * dloss / count for kept rows, 0 for
// ignored ones (and so everywhere when count is 0). The row stages are [N, 1] so that the
// kernel's rows are the logits rows; that makes each row count the kept rows itself (N
// compares per row, against V exps) instead of a scalar stage forcing a single row.
Bodies lowerCrossEntropyLossGrad(LowerContext &ctx) {
  KILN_RETURN_IF_ERROR(checkShapes(ctx));
  const int64_t n = ctx.inputType(0).shape[0], v = ctx.inputType(0).shape[1];
  const Shape row_shape{n, 1};
  const std::vector<ExprRef> row_idx{var(0), iconst(0)};
  int r = ctx.newReduceVar();
  const int max = ctx.addStage("max", row_shape, ScalarType::F32,
                               reduce(ReduceOp::Max, r, v, ctx.input(0, {var(0), rvar(r)})));
  // exp(x - max) once per element, held for the row: its sum and the output read it.
  const int e = ctx.addStage(
      "exp", {n, v}, ScalarType::F32,
      unary(UnaryOp::Exp, ctx.input(0, {var(0), var(1)}) - ctx.read(max, row_idx)), true);
  r = ctx.newReduceVar();
  const int sum = ctx.addStage("sum", row_shape, ScalarType::F32,
                               reduce(ReduceOp::Sum, r, v, ctx.read(e, {var(0), rvar(r)})));
  const int count = ctx.addStage("count", row_shape, ScalarType::F32, keptRows(ctx, n));

  ExprRef label = ctx.input(1, {var(0)});
  ExprRef p = ctx.read(e, {var(0), var(1)}) / ctx.read(sum, row_idx);
  ExprRef onehot = select(binary(BinaryOp::Eq, var(1), label), fconst(1), fconst(0));
  ExprRef scale = ctx.input(2, {}) / ctx.read(count, row_idx);
  return std::vector<ExprRef>{select(isKept(ctx, label), (p - onehot) * scale, fconst(0))};
}

} // namespace

KILN_REGISTER_LOWERING("CrossEntropyLoss", lowerCrossEntropyLoss);
KILN_REGISTER_LOWERING("CrossEntropyLossGrad", lowerCrossEntropyLossGrad);

} // namespace kiln::codegen
