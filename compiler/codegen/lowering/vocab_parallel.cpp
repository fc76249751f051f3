// Lowerings of the vocab-parallel ops (ops/lib/vocab_parallel.cpp): the shard
// index, the row statistics of one rank's logits, and its part of the cross
// entropy and of its gradient, in the stages of CrossEntropyLoss's lowering.
#include <limits>

#include "compiler/codegen/op_lowering.h"

namespace kiln::codegen {
namespace {

using Bodies = Expected<std::vector<ExprRef>>;

ExprRef inRange(ExprRef i, int64_t size) {
  return binary(BinaryOp::And, binary(BinaryOp::Ge, i, iconst(0)),
                binary(BinaryOp::Lt, i, iconst(size)));
}

// i - rank * shard_size inside the shard, -1 outside.
Bodies lowerShardIndex(LowerContext &ctx) {
  const int64_t size = ctx.attrs().getInt("shard_size");
  const std::vector<ExprRef> idx = LowerContext::vars(ctx.inputType(0).shape.size());
  ExprRef local = ctx.input(0, idx) - ctx.input(1, {}) * iconst(size);
  return std::vector<ExprRef>{select(inRange(local, size), local, iconst(-1))};
}

Status checkLogits(const LowerContext &ctx) {
  const Shape &logits = ctx.inputType(0).shape;
  if (logits.size() != 2 || logits[1] < 1)
    return ctx.error("needs logits [N, V/t] with V/t >= 1");
  return Status::ok();
}

// Whether column `column` of this rank's logits is a word of the vocabulary,
// not padding (ops/defs/vocab_parallel.xml `vocab`); null when the vocabulary
// is not padded. `rank` is the input holding the rank.
ExprRef realColumn(const LowerContext &ctx, ExprRef column, size_t rank) {
  const int64_t vocab = ctx.attrs().getInt("vocab");
  if (vocab <= 0 || ctx.numInputs() <= rank)
    return nullptr;
  const int64_t v = ctx.inputType(0).shape[1];
  return binary(BinaryOp::Lt, ctx.input(rank, {}) * iconst(v) + column, iconst(vocab));
}

Bodies lowerMax(LowerContext &ctx) {
  KILN_RETURN_IF_ERROR(checkLogits(ctx));
  const int r = ctx.newReduceVar();
  ExprRef x = ctx.input(0, {var(0), rvar(r)});
  if (ExprRef real = realColumn(ctx, rvar(r), 1))
    x = select(real, x, fconst(std::numeric_limits<float>::lowest()));
  return std::vector<ExprRef>{reduce(ReduceOp::Max, r, ctx.inputType(0).shape[1], x)};
}

Bodies lowerSumExp(LowerContext &ctx) {
  KILN_RETURN_IF_ERROR(checkLogits(ctx));
  const int r = ctx.newReduceVar();
  ExprRef shifted = ctx.input(0, {var(0), rvar(r)}) - ctx.input(1, {var(0), iconst(0)});
  ExprRef e = unary(UnaryOp::Exp, shifted);
  if (ExprRef real = realColumn(ctx, rvar(r), 2))
    e = select(real, e, fconst(0));
  return std::vector<ExprRef>{reduce(ReduceOp::Sum, r, ctx.inputType(0).shape[1], e)};
}

// A row's label and what follows from it on this rank.
struct Label {
  ExprRef kept;   // not ignore_index
  ExprRef local;  // its column in this rank's shard, outside [0, V/t) when another holds it
  ExprRef column; // local clamped into the shard, for the load in the arm not taken
};

Label labelOf(const LowerContext &ctx, ExprRef row) {
  const int64_t v = ctx.inputType(0).shape[1];
  ExprRef label = ctx.input(1, {row});
  ExprRef local = label - ctx.input(2, {}) * iconst(v);
  return {binary(BinaryOp::Ne, label, iconst(ctx.attrs().getInt("ignore_index"))), local,
          binary(BinaryOp::Max, binary(BinaryOp::Min, local, iconst(v - 1)), iconst(0))};
}

// Rows not labelled ignore_index, counted in f32 (exact up to 2^24 rows).
ExprRef keptRows(LowerContext &ctx, int64_t rows) {
  const int r = ctx.newReduceVar();
  return reduce(ReduceOp::Sum, r, rows, select(labelOf(ctx, rvar(r)).kept, fconst(1), fconst(0)));
}

// sum over the rows this rank holds the label of, of max + log(sum_exp) -
// logits[label], over max(count, 1); a scalar, so one row of the kernel.
Bodies lowerLoss(LowerContext &ctx) {
  KILN_RETURN_IF_ERROR(checkLogits(ctx));
  const int64_t n = ctx.inputType(0).shape[0], v = ctx.inputType(0).shape[1];
  const int r = ctx.newReduceVar();
  const Label l = labelOf(ctx, rvar(r));
  ExprRef term = ctx.input(3, {rvar(r), iconst(0)}) +
                 unary(UnaryOp::Log, ctx.input(4, {rvar(r), iconst(0)})) -
                 ctx.input(0, {rvar(r), l.column});
  ExprRef held = binary(BinaryOp::And, l.kept, inRange(l.local, v));
  ExprRef total = reduce(ReduceOp::Sum, r, n, select(held, term, fconst(0)));
  return std::vector<ExprRef>{total / binary(BinaryOp::Max, keptRows(ctx, n), fconst(1))};
}

// dlogits[i, j] = (exp(logits[i, j] - max[i]) / sum_exp[i] - (j == local label)) * dloss /
// count on kept rows, 0 on ignored ones; the count is an [N, 1] stage so that the kernel's
// rows stay the logits rows (as CrossEntropyLossGrad's lowering does).
Bodies lowerLossGrad(LowerContext &ctx) {
  KILN_RETURN_IF_ERROR(checkLogits(ctx));
  const int64_t n = ctx.inputType(0).shape[0];
  const std::vector<ExprRef> row{var(0), iconst(0)};
  const int count = ctx.addStage("count", {n, 1}, ScalarType::F32, keptRows(ctx, n));
  const Label l = labelOf(ctx, var(0));
  ExprRef p =
      unary(UnaryOp::Exp, ctx.input(0, {var(0), var(1)}) - ctx.input(3, row)) / ctx.input(4, row);
  ExprRef onehot = select(binary(BinaryOp::Eq, var(1), l.local), fconst(1), fconst(0));
  ExprRef scale = ctx.input(5, {}) / ctx.read(count, row);
  ExprRef kept = l.kept;
  if (ExprRef real = realColumn(ctx, var(1), 2)) // padding: no gradient
    kept = binary(BinaryOp::And, kept, real);
  return std::vector<ExprRef>{select(kept, (p - onehot) * scale, fconst(0))};
}

} // namespace

KILN_REGISTER_LOWERING("ShardIndex", lowerShardIndex);
KILN_REGISTER_LOWERING("VocabParallelMax", lowerMax);
KILN_REGISTER_LOWERING("VocabParallelSumExp", lowerSumExp);
KILN_REGISTER_LOWERING("VocabParallelCrossEntropy", lowerLoss);
KILN_REGISTER_LOWERING("VocabParallelCrossEntropyGrad", lowerLossGrad);

} // namespace kiln::codegen
