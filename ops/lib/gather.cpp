// Gather (embedding lookup of table rows by integer indices) and its table
// gradient EmbeddingGrad (scatter-add of the output gradient rows).
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "ops/kernel_util.h"
#include "ops/op_builder.h"
#include "ops/op_registry.h"

namespace kiln::ops {
namespace {

// Elements per table row: the product of all dims after the first.
int64_t rowSize(const Shape &table_shape) {
  return numElements(Shape(table_shape.begin() + 1, table_shape.end()));
}

Status indexError(const char *op, const KernelContext &ctx, const Tensor &indices, int64_t pos,
                  int64_t rows) {
  return Error(std::string(op) + " node '" + ctx.node_name + "': index " +
               std::to_string(indices.getInt(pos)) + " at position " + std::to_string(pos) +
               " of the indices is outside [0, " + std::to_string(rows) + ")");
}

// --- Gather ------------------------------------------------------------------

Expected<std::vector<TensorType>> inferGather(const std::vector<TensorType> &in,
                                              const AttrMap &attrs) {
  const TensorType &table = in[0], &indices = in[1];
  if (table.rank() < 1)
    return Error("Gather table must have rank 1 or more ([rows, ...]), got " + typeToString(table));
  Shape out = indices.shape;
  out.insert(out.end(), table.shape.begin() + 1, table.shape.end());
  return std::vector<TensorType>{{table.dtype, out}};
}

Expected<std::vector<ValueId>> gradGather(GradContext &ctx) {
  OpBuilder &b = ctx.builder;
  ValueId dy = ctx.output_grads[0];
  if (dy == kNoValue)
    return std::vector<ValueId>{kNoValue, kNoValue};
  const ValueId table = ctx.input(0);
  ValueId dtable = b.create("EmbeddingGrad", "dtable", {dy, ctx.input(1)},
                            {{"num_rows", b.shape(table)[0]},
                             {"skip_out_of_range", ctx.attrs().getBool("skip_out_of_range")}});
  if (dtable != kNoValue && b.dtype(dtable) != b.dtype(table))
    dtable = b.create("Cast", "dtable_cast", {dtable}, {{"dtype", b.dtype(table)}});
  KILN_RETURN_IF_ERROR(b.status());
  return std::vector<ValueId>{dtable, kNoValue};
}

// Rows are copied bit for bit: input and output share the dtype, so nothing
// rounds. A skipped index leaves its row as the output arrives: zero.
Status gatherKernel(const KernelContext &ctx, const std::vector<const Tensor *> &in,
                    std::vector<Tensor> &out, const AttrMap &attrs) {
  const Tensor &table = *in[0], &indices = *in[1];
  const int64_t rows = table.shape()[0];
  const bool skip = attrs.getBool("skip_out_of_range");
  const size_t row_bytes = static_cast<size_t>(rowSize(table.shape())) * dtypeSize(table.dtype());
  const auto *src = static_cast<const uint8_t *>(table.data());
  auto *dst = static_cast<uint8_t *>(out[0].data());
  for (int64_t p = 0; p < indices.numElements(); ++p) {
    const int64_t row = indices.getInt(p);
    if ((row < 0 || row >= rows) && skip)
      continue;
    if (row < 0 || row >= rows)
      return indexError("Gather", ctx, indices, p, rows);
    std::memcpy(dst + p * row_bytes, src + row * row_bytes, row_bytes);
  }
  return Status::ok();
}

// --- EmbeddingGrad -----------------------------------------------------------

Expected<std::vector<TensorType>> inferEmbeddingGrad(const std::vector<TensorType> &in,
                                                     const AttrMap &attrs) {
  const TensorType &dy = in[0], &indices = in[1];
  const int64_t rows = attrs.getInt("num_rows");
  if (rows < 1)
    return Error("EmbeddingGrad num_rows must be >= 1, got " + std::to_string(rows));
  const size_t r = indices.shape.size();
  if (dy.shape.size() < r ||
      !std::equal(indices.shape.begin(), indices.shape.end(), dy.shape.begin()))
    return Error("EmbeddingGrad dy " + typeToString(dy) + " must start with the indices shape " +
                 shapeToString(indices.shape) + " (dy has shape indices.shape + row shape)");
  Shape out{rows};
  out.insert(out.end(), dy.shape.begin() + static_cast<int64_t>(r), dy.shape.end());
  return std::vector<TensorType>{{dy.dtype, out}};
}

Status embeddingGradKernel(const KernelContext &ctx, const std::vector<const Tensor *> &in,
                           std::vector<Tensor> &out, const AttrMap &attrs) {
  const Tensor &dy = *in[0], &indices = *in[1];
  Tensor &dtable = out[0];
  const int64_t rows = dtable.shape()[0];
  const int64_t row = rowSize(dtable.shape());
  const bool skip = attrs.getBool("skip_out_of_range");
  std::vector<double> acc(static_cast<size_t>(dtable.numElements()), 0.0);
  for (int64_t p = 0; p < indices.numElements(); ++p) {
    const int64_t target = indices.getInt(p);
    if ((target < 0 || target >= rows) && skip)
      continue;
    if (target < 0 || target >= rows)
      return indexError("EmbeddingGrad", ctx, indices, p, rows);
    for (int64_t j = 0; j < row; ++j)
      acc[target * row + j] += dy.getFloat(p * row + j);
  }
  storeDoubles(dtable, acc, ctx.overflow);
  return Status::ok();
}

} // namespace

KILN_REGISTER_OP("Gather", OpImpl{inferGather, gradGather, gatherKernel});
KILN_REGISTER_OP("EmbeddingGrad", OpImpl{inferEmbeddingGrad, {}, embeddingGradKernel});

} // namespace kiln::ops
