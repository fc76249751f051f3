// Lowerings of the data-movement ops (ops/lib/reshape.cpp, transpose.cpp, slice_pad.cpp,
// concat_split.cpp, broadcast.cpp's BroadcastTo, rotate_half.cpp): index maps onto one load.
#include "compiler/codegen/op_lowering.h"
#include "ops/kernel_util.h"

namespace kiln::codegen {
namespace {

using Bodies = Expected<std::vector<ExprRef>>;

ExprRef plus(ExprRef i, int64_t offset) { return offset == 0 ? i : i + iconst(offset); }

// Size-1 axes carry no index. The other axes fall into runs of consecutive input and output axes
// with equal element counts, and only inside a run is the index linearised and split again: an
// axis the reshape keeps stays a plain var (affine, so the loop over it vectorises).
Bodies lowerReshape(LowerContext &ctx) {
  const Shape &in = ctx.inputType(0).shape;
  const Shape &out = ctx.outputType(0).shape;
  std::vector<ExprRef> idx(in.size(), iconst(0));
  if (numElements(out) == 0)
    return std::vector<ExprRef>{ctx.input(0, idx)}; // no element is ever computed
  std::vector<int> in_axes, out_axes;
  for (size_t a = 0; a < in.size(); ++a)
    if (in[a] != 1)
      in_axes.push_back(static_cast<int>(a));
  for (size_t a = 0; a < out.size(); ++a)
    if (out[a] != 1)
      out_axes.push_back(static_cast<int>(a));

  size_t i = 0, o = 0;
  while (i < in_axes.size() && o < out_axes.size()) {
    size_t i_end = i + 1, o_end = o + 1;
    int64_t in_count = in[in_axes[i]], out_count = out[out_axes[o]];
    while (in_count != out_count) {
      if (in_count < out_count && i_end < in_axes.size())
        in_count *= in[in_axes[i_end++]];
      else if (out_count < in_count && o_end < out_axes.size())
        out_count *= out[out_axes[o_end++]];
      else
        return ctx.error("shapes " + shapeToString(in) + " and " + shapeToString(out) +
                         " hold different element counts");
    }
    if (i_end - i == 1 && o_end - o == 1) {
      idx[in_axes[i]] = var(out_axes[o]);
    } else {
      ExprRef flat;
      int64_t stride = 1;
      for (size_t k = o_end; k-- > o;) {
        ExprRef term = stride == 1 ? var(out_axes[k]) : var(out_axes[k]) * iconst(stride);
        flat = flat ? term + flat : term;
        stride *= out[out_axes[k]];
      }
      stride = 1;
      for (size_t k = i_end; k-- > i;) {
        ExprRef index = stride == 1 ? flat : flat / iconst(stride);
        if (k != i) // the run's first axis needs no wrap: flat / stride < its extent
          index = binary(BinaryOp::Rem, index, iconst(in[in_axes[k]]));
        idx[in_axes[k]] = index;
        stride *= in[in_axes[k]];
      }
    }
    i = i_end;
    o = o_end;
  }
  if (i != in_axes.size() || o != out_axes.size())
    return ctx.error("shapes " + shapeToString(in) + " and " + shapeToString(out) +
                     " hold different element counts");
  return std::vector<ExprRef>{ctx.input(0, idx)};
}

// Output axis i is input axis perm[i].
Bodies lowerTranspose(LowerContext &ctx) {
  const std::vector<int64_t> &perm = ctx.attrs().getInts("perm");
  const size_t rank = ctx.inputType(0).shape.size();
  if (perm.size() != rank)
    return ctx.error("perm " + shapeToString(perm) + " does not have one entry per input axis");
  std::vector<ExprRef> idx(rank);
  for (size_t i = 0; i < rank; ++i) {
    if (perm[i] < 0 || perm[i] >= static_cast<int64_t>(rank) || idx[perm[i]])
      return ctx.error("perm " + shapeToString(perm) + " is not a permutation");
    idx[perm[i]] = var(static_cast<int>(i));
  }
  return std::vector<ExprRef>{ctx.input(0, idx)};
}

Bodies lowerSlice(LowerContext &ctx) {
  const std::vector<int64_t> &begin = ctx.attrs().getInts("begin");
  const size_t rank = ctx.inputType(0).shape.size();
  if (begin.size() != rank)
    return ctx.error("begin does not have one entry per input axis");
  std::vector<ExprRef> idx;
  for (size_t a = 0; a < rank; ++a)
    idx.push_back(plus(var(static_cast<int>(a)), begin[a]));
  return std::vector<ExprRef>{ctx.input(0, idx)};
}

// The fill value in the compute type of `dtype`, as the reference stores it.
ExprRef fillValue(DType dtype, double value) {
  switch (scalarTypeOf(dtype)) {
  case ScalarType::F32:
    return fconst(static_cast<float>(value));
  case ScalarType::I64:
    return iconst(static_cast<int64_t>(value));
  case ScalarType::Bool:
    return bconst(static_cast<int64_t>(value) != 0);
  }
  return fconst(0);
}

// The load's index is clamped into x on each padded side: both arms of the select are
// evaluated, so the border's load must still land inside the buffer.
Bodies lowerPad(LowerContext &ctx) {
  const Shape &in = ctx.inputType(0).shape;
  const std::vector<int64_t> &before = ctx.attrs().getInts("before");
  const std::vector<int64_t> &after = ctx.attrs().getInts("after");
  if (before.size() != in.size() || after.size() != in.size())
    return ctx.error("before and after need one entry per input axis");
  ExprRef fill = fillValue(ctx.outputType(0).dtype, ctx.attrs().getFloat("value"));
  if (numElements(in) == 0)
    return std::vector<ExprRef>{fill}; // all border
  std::vector<ExprRef> idx;
  ExprRef inside;
  auto require = [&](ExprRef cond) {
    inside = inside ? binary(BinaryOp::And, inside, cond) : cond;
  };
  for (size_t a = 0; a < in.size(); ++a) {
    const ExprRef v = var(static_cast<int>(a));
    ExprRef index = plus(v, -before[a]);
    if (before[a] > 0) {
      require(binary(BinaryOp::Ge, v, iconst(before[a])));
      index = binary(BinaryOp::Max, index, iconst(0));
    }
    if (after[a] > 0) {
      require(binary(BinaryOp::Lt, v, iconst(before[a] + in[a])));
      index = binary(BinaryOp::Min, index, iconst(in[a] - 1));
    }
    idx.push_back(index);
  }
  ExprRef x = ctx.input(0, idx);
  return std::vector<ExprRef>{inside ? select(inside, x, fill) : x};
}

Expected<int64_t> axisAttr(const LowerContext &ctx, const Shape &shape) {
  if (shape.empty())
    return ctx.error("needs an input with at least one axis");
  auto axis = ops::normalizeAxis(ctx.attrs().getInt("axis"), static_cast<int64_t>(shape.size()));
  if (!axis)
    return ctx.error(axis.message());
  return *axis;
}

// A chain of selects on the concat axis, the last input innermost; each input's index is
// clamped into it because every arm's load is evaluated.
Bodies lowerConcat(LowerContext &ctx) {
  const Shape &shape = ctx.outputType(0).shape;
  KILN_ASSIGN_OR_RETURN(int64_t axis, axisAttr(ctx, shape));
  const ExprRef v = var(static_cast<int>(axis));
  std::vector<int64_t> offsets;
  int64_t total = 0;
  for (size_t k = 0; k < ctx.numInputs(); ++k) {
    offsets.push_back(total);
    total += ctx.inputType(k).shape[axis];
  }
  ExprRef body;
  for (size_t k = ctx.numInputs(); k-- > 0;) {
    const int64_t size = ctx.inputType(k).shape[axis], end = offsets[k] + size;
    if (size == 0)
      continue;
    ExprRef index = plus(v, -offsets[k]);
    if (offsets[k] > 0)
      index = binary(BinaryOp::Max, index, iconst(0));
    if (end < total)
      index = binary(BinaryOp::Min, index, iconst(size - 1));
    std::vector<ExprRef> idx = LowerContext::vars(shape.size());
    idx[axis] = index;
    ExprRef x = ctx.input(k, idx);
    body = body ? select(binary(BinaryOp::Lt, v, iconst(end)), x, body) : x;
  }
  if (!body) // the output has no element
    body = ctx.input(0, LowerContext::vars(shape.size()));
  return std::vector<ExprRef>{body};
}

// Output k reads the input shifted by the sizes before it along the axis.
Bodies lowerSplit(LowerContext &ctx) {
  const Shape &shape = ctx.inputType(0).shape;
  KILN_ASSIGN_OR_RETURN(int64_t axis, axisAttr(ctx, shape));
  std::vector<ExprRef> bodies;
  int64_t offset = 0;
  for (int64_t size : ctx.attrs().getInts("sizes")) {
    std::vector<ExprRef> idx = LowerContext::vars(shape.size());
    idx[axis] = plus(idx[axis], offset);
    bodies.push_back(ctx.input(0, idx));
    offset += size;
  }
  if (offset != shape[axis])
    return ctx.error("sizes " + shapeToString(ctx.attrs().getInts("sizes")) +
                     " do not sum to the axis's " + std::to_string(shape[axis]) + " elements");
  return bodies;
}

Bodies lowerBroadcastTo(LowerContext &ctx) {
  return std::vector<ExprRef>{ctx.broadcastInput(0, ctx.outputType(0).shape)};
}

// y[j] = -x[j + d/2] for j < d/2, else x[j - d/2]: both halves read x[(j + d/2) mod d], which
// stays inside the row for every j (no out-of-range load in the untaken arm).
Bodies lowerRotateHalf(LowerContext &ctx) {
  const Shape &shape = ctx.outputType(0).shape;
  if (shape.empty() || shape.back() % 2 != 0)
    return ctx.error("needs at least one axis and an even last dimension");
  const int last = static_cast<int>(shape.size()) - 1;
  const int64_t d = shape.back(), half = d / 2;
  std::vector<ExprRef> idx = LowerContext::vars(shape.size());
  if (d == 0)
    return std::vector<ExprRef>{ctx.input(0, idx)};
  idx[last] = binary(BinaryOp::Rem, var(last) + iconst(half), iconst(d));
  // The rotated read is a gather; from a bf16 or f16 row it would be a
  // scalar load per element, so such a row is widened to f32 once, in
  // scratch, and gathered from there.
  ExprRef x;
  if (ctx.inputType(0).dtype == DType::F32) {
    x = ctx.input(0, idx);
  } else {
    const int row = ctx.addStage("widened", shape, ScalarType::F32,
                                 ctx.input(0, LowerContext::vars(shape.size())), true);
    x = ctx.read(row, idx);
  }
  return std::vector<ExprRef>{select(binary(BinaryOp::Lt, var(last), iconst(half)), -x, x)};
}

} // namespace

KILN_REGISTER_LOWERING("Reshape", lowerReshape);
KILN_REGISTER_LOWERING("Transpose", lowerTranspose);
KILN_REGISTER_LOWERING("Slice", lowerSlice);
KILN_REGISTER_LOWERING("Pad", lowerPad);
KILN_REGISTER_LOWERING("Concat", lowerConcat);
KILN_REGISTER_LOWERING("Split", lowerSplit);
KILN_REGISTER_LOWERING("BroadcastTo", lowerBroadcastTo);
KILN_REGISTER_LOWERING("RotateHalf", lowerRotateHalf);

} // namespace kiln::codegen
