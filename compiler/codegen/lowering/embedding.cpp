// Lowerings of Gather and EmbeddingGrad (ops/lib/gather.cpp): a row lookup by index, and its
// scatter-add written as a gather: each table row sums the dy rows whose index names it.
#include "compiler/codegen/op_lowering.h"
#include "kernels/library_kernels.h"

namespace kiln::codegen {
namespace {

using Bodies = Expected<std::vector<ExprRef>>;

// y[t..., j...] = table[indices[t...], j...]. The reference rejects an index outside the
// table; a kernel cannot fail, so the index is clamped to keep the load inside the table.
// With skip_out_of_range such an index gives a zero row, as the reference's does.
Bodies lowerGather(LowerContext &ctx) {
  const Shape &table = ctx.inputType(0).shape;
  const Shape &out = ctx.outputType(0).shape;
  const size_t index_rank = ctx.inputType(1).shape.size();
  if (table.empty() || out.size() != index_rank + table.size() - 1)
    return ctx.error("needs a table of rank 1 or more and an output of shape indices.shape + "
                     "table.shape[1:]");
  if (table[0] == 0 && numElements(out) > 0)
    return ctx.error("the table has no rows to gather");
  std::vector<ExprRef> t = LowerContext::vars(index_rank);
  ExprRef index = ctx.input(1, t);
  ExprRef row =
      binary(BinaryOp::Max, binary(BinaryOp::Min, index, iconst(table[0] - 1)), iconst(0));
  std::vector<ExprRef> idx{row};
  for (size_t d = 1; d < table.size(); ++d)
    idx.push_back(var(static_cast<int>(index_rank + d - 1)));
  if (!ctx.attrs().getBool("skip_out_of_range"))
    return std::vector<ExprRef>{ctx.input(0, idx)};
  return std::vector<ExprRef>{
      select(binary(BinaryOp::Eq, index, row), ctx.input(0, idx), fconst(0))};
}

// dtable[v, j...] = sum over index positions t of (indices[t] == v ? dy[t, j...] : 0), one rvar
// per index axis (outer axes outside). An index outside [0, num_rows) matches no row, where
// the reference fails. That gather form is what the kernel computes; it runs as the
// scatter-add library routine (kernels/library_kernels.h), tokens x row steps instead of
// num_rows x tokens x row.
Bodies lowerEmbeddingGrad(LowerContext &ctx) {
  const Shape &dy = ctx.inputType(0).shape;
  const Shape &indices = ctx.inputType(1).shape;
  const Shape &out = ctx.outputType(0).shape;
  if (out.empty() || dy.size() < indices.size() || out.size() != 1 + dy.size() - indices.size())
    return ctx.error("needs dy of shape indices.shape + row shape and dtable of shape "
                     "[num_rows] + row shape");
  std::vector<int> rvars;
  std::vector<ExprRef> t;
  for (size_t d = 0; d < indices.size(); ++d) {
    rvars.push_back(ctx.newReduceVar());
    t.push_back(rvar(rvars.back()));
  }
  std::vector<ExprRef> dy_idx = t;
  for (size_t d = 1; d < out.size(); ++d)
    dy_idx.push_back(var(static_cast<int>(d)));
  ExprRef hit = binary(BinaryOp::Eq, ctx.input(1, t), var(0));
  ExprRef body = select(hit, ctx.input(0, dy_idx), fconst(0));
  for (size_t d = indices.size(); d-- > 0;)
    body = reduce(ReduceOp::Sum, rvars[d], indices[d], body);
  ctx.callLibrary(kernels::kEmbeddingGradRoutine,
                  {ctx.inputBuffer(0), ctx.inputBuffer(1), ctx.outputSlot(0),
                   static_cast<int64_t>(ctx.inputType(0).dtype),
                   static_cast<int64_t>(ctx.inputType(1).dtype),
                   static_cast<int64_t>(ctx.outputType(0).dtype), numElements(indices),
                   numElements(Shape(out.begin() + 1, out.end()))});
  return std::vector<ExprRef>{body};
}

} // namespace

KILN_REGISTER_LOWERING("Gather", lowerGather);
KILN_REGISTER_LOWERING("EmbeddingGrad", lowerEmbeddingGrad);

} // namespace kiln::codegen
